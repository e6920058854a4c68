"""Every ```python block in README.md and docs/*.md runs as a user would paste it.

Each block runs on its own, in a fresh Python process whose working directory is an
empty temporary directory (a block must run from anywhere: it reads no file of the
repository by a relative path), with ``INTENTUSNET_STORE`` unset, warnings turned
into errors as in the suite, and every network connection refused but to loopback
addresses: a block that needs a server starts its own.

Every relative link of these pages leads to a file that exists and, in a page, to
one of its headings; every ``docs/NAME.md`` a page names exists.

A block whose first line names a test module (``# test_weather.py``) is one a
user runs with pytest: tests/integrations/test_pytest_plugin.py runs it so, and
this file checks that it does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Run before each block: loopback only, then the block as ``__main__``.
GUARD = textwrap.dedent(
    """
    import ipaddress, runpy, socket, sys

    def _loopback(host):
        if host in (None, "localhost", ""):
            return True
        try:
            return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
        except ValueError:
            return False

    def _refuse(what):
        raise ConnectionRefusedError(f"documentation blocks stay on loopback: {what}")

    _getaddrinfo, _connect, _connect_ex = (
        socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex
    )

    def getaddrinfo(host, *args, **kwargs):
        if not _loopback(host):
            _refuse(host)
        return _getaddrinfo(host, *args, **kwargs)

    def connect(self, address):
        if isinstance(address, tuple) and not _loopback(address[0]):
            _refuse(address)
        return _connect(self, address)

    def connect_ex(self, address):
        if isinstance(address, tuple) and not _loopback(address[0]):
            _refuse(address)
        return _connect_ex(self, address)

    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex
    sys.argv = [sys.argv[1]]
    runpy.run_path(sys.argv[0], run_name="__main__")
    """
)


#: The first line of a block that is a test module, naming it.
TEST_MODULE = re.compile(r"# (test_\w+\.py)\n")


def _blocks() -> Iterator[object]:
    """Every python block as a pytest param named ``file:line``."""
    for path in DOCS:
        lines = path.read_text().splitlines()
        start: int | None = None
        for number, line in enumerate(lines, 1):
            if start is None and line.strip() == "```python":
                start = number
            elif start is not None and line.strip() == "```":
                code = "\n".join(lines[start : number - 1]) + "\n"
                name = f"{path.relative_to(ROOT)}:{start}"
                yield pytest.param(name, code, id=name)
                start = None
        assert start is None, f"{path.name}:{start}: a python block is never closed"


ALL_BLOCKS = list(_blocks())
BLOCKS = [p for p in ALL_BLOCKS if not TEST_MODULE.match(p.values[1])]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty working directory: a block must not need the repository's files."""
    return tmp_path


def test_blocks_are_found() -> None:
    """The collector finds the README's blocks and those of the docs."""
    names = [param.values[0] for param in BLOCKS]
    assert any(name.startswith("README.md:") for name in names)
    assert len({name.split(":")[0] for name in names}) >= 8


def _run(name: str, code: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a block would run: its own process, guarded, in ``workdir``."""
    script = workdir / ("doc_" + re.sub(r"\W", "_", name) + ".py")
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("INTENTUSNET_STORE", None)
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", GUARD, script.name],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_test_modules_run_through_pytest() -> None:
    """Each block that is a test module runs in the pytest plugin's tests."""
    plugin_tests = (ROOT / "tests/integrations/test_pytest_plugin.py").read_text()
    modules = [
        match.group(1)
        for param in ALL_BLOCKS
        if (match := TEST_MODULE.match(param.values[1]))
    ]
    assert modules  # docs/pytest.md shows some
    for module in modules:
        assert f'doc_example("{module}")' in plugin_tests, module


@pytest.mark.parametrize(
    "code",
    [
        "import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=1)\n",
        "import httpx\nhttpx.get('http://example.com/', timeout=1)\n",
    ],
    ids=["socket", "httpx"],
)
def test_blocks_cannot_reach_the_network(code: str, workdir: Path) -> None:
    """A block connecting beyond loopback fails, refused before any packet leaves."""
    result = _run("network", code, workdir)
    assert result.returncode != 0
    assert "documentation blocks stay on loopback" in result.stderr


def test_blocks_run_in_an_empty_directory(workdir: Path) -> None:
    """A block sees no INTENTUSNET_STORE and nothing but itself in its directory."""
    code = (
        "import os\n"
        "assert 'INTENTUSNET_STORE' not in os.environ\n"
        "assert sorted(os.listdir()) == ['doc_cwd.py']\n"
    )
    result = _run("cwd", code, workdir)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow  # a fresh interpreter per block, some starting servers
@pytest.mark.parametrize(("name", "code"), BLOCKS)
def test_block_runs(name: str, code: str, workdir: Path) -> None:
    """The block runs to the end on its own, exit status 0, network refused."""
    result = _run(name, code, workdir)
    if result.returncode != 0:
        pytest.fail(f"{name} failed:\n{result.stderr[-3000:]}", pytrace=False)


def test_python_is_fenced_as_python() -> None:
    """No block of Python hides from this test under another fence (py, python3)."""
    for path in DOCS:
        fences = re.findall(r"^\s*```(\w+)", path.read_text(), re.M)
        odd = {fence for fence in fences if fence.lower().startswith("py")}
        assert odd <= {"python"}, f"{path.name}: fenced as {sorted(odd)}"


#: A fenced block: links and names inside it are examples, not references.
_FENCED = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
#: A markdown link or image: ``[text](target)`` or ``[text](target "title")``.
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _prose(path: Path) -> str:
    return _FENCED.sub("", path.read_text())


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub makes for the page's headings (``-1`` for repeats)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for title in re.findall(r"^#{1,6} +(.+?) *$", _prose(page), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        repeats = seen.get(slug, 0)
        seen[slug] = repeats + 1
        found.add(slug if repeats == 0 else f"{slug}-{repeats}")
    return found


def _links() -> list[tuple[Path, str]]:
    return [
        (page, target)
        for page in DOCS
        # Inline code is left out: `[x](y)` there is an example.
        for target in _LINK.findall(re.sub(r"`[^`\n]*`", "", _prose(page)))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # https:, mailto:
    ]


def test_relative_links_lead_to_a_file_and_a_heading() -> None:
    """Each relative link names a file that exists and, in a page, a heading of it."""
    links = _links()
    assert len(links) > 100  # the pattern really finds the pages' links
    for page, target in links:
        name, _, anchor = target.partition("#")
        linked = (page.parent / name).resolve() if name else page
        where = f"{page.relative_to(ROOT)}: {target}"
        assert linked.exists(), f"{where}: no such file"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{where}: no such heading"


def test_anchors_are_made_as_github_makes_them() -> None:
    """Code, colons and repeats in headings give the anchors pages link to."""
    anchors = _anchors(ROOT / "docs" / "cli.md")
    assert "intentusnet-records-list" in anchors  # ## `intentusnet records list`
    assert "naming-a-store-a-path-or-a-url" in anchors  # ## Naming a store: a ...
    assert "intentusnet-replay" in anchors
    assert "intentusnet replay" not in anchors


def test_pages_named_in_the_text_exist() -> None:
    """Every docs/NAME.md a page names, linked or not, is a page of the docs."""
    for page in DOCS:
        for name in re.findall(r"\bdocs/[\w.-]+\.md\b", page.read_text()):
            assert (ROOT / name).exists(), f"{page.relative_to(ROOT)} names {name}"
