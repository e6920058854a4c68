"""The package's layout rules (docs/architecture.md): imports point down, no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "intentusnet"


def _module(package: Path, path: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Every package module and the package names it imports, anywhere in it.

    Imports inside functions and under ``TYPE_CHECKING`` count: the walk visits every
    node. ``from x import name`` yields both ``x`` and ``x.name``.
    """
    found: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        module = _module(package, path)
        base = (
            module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        )
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    up = base[: len(base) - node.level + 1]
                    target = ".".join([*up, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                targets.add(target)
                targets.update(f"{target}.{alias.name}" for alias in node.names)
        found[module] = {t for t in targets if t.startswith(package.name)}
    return found


def _graph(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    """The modules each module imports: names resolved to the module holding them.

    ``x.name`` counts as module ``x.name`` when that is a module, else as ``x``. An
    import of the module's own package (or a package above it) is left out: Python
    has already begun importing those before the module runs.
    """
    graph: dict[str, set[str]] = {}
    for module, targets in imports.items():
        edges: set[str] = set()
        for target in targets:
            while target and target not in imports:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                edges.add(target)
        graph[module] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as ``[a, b, ..., a]``, or ``[]`` when there is none."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path = [start]
        todo = [iter(sorted(graph[start]))]
        while todo:
            target = next(todo[-1], None)
            if target is None:
                done.add(path.pop())
                todo.pop()
            elif target in path:
                return [*path[path.index(target) :], target]
            elif target not in done:
                path.append(target)
                todo.append(iter(sorted(graph[target])))
    return []


def _reaches(module: str, imports: dict[str, set[str]], banned: str) -> list[str]:
    """The imports of ``module`` that fall under the package part ``banned``."""
    prefix = f"intentusnet.{banned}"
    return sorted(
        t for t in imports[module] if t == prefix or t.startswith(prefix + ".")
    )


IMPORTS = _imports()


@pytest.mark.parametrize(
    ("part", "banned"),
    [
        ("routing", "cache"),
        ("routing", "steps"),
        ("routing", "cli"),
        ("routing", "server"),
        ("replay", "routing"),
        ("replay", "steps"),
        ("store", "routing"),
        ("store", "steps"),
        ("store", "cache"),
        ("store", "replay"),
        ("record", "store"),
        ("record", "replay"),
        ("record", "routing"),
        ("record", "envelope"),
        ("record", "tlog"),
        ("envelope", "record"),
        ("hashing", "envelope"),
        ("_util", "record"),
        ("_util", "envelope"),
        ("steps", "testing"),
        ("integrations", "testing"),
    ],
)
def test_imports_point_down(part: str, banned: str) -> None:
    """No module of a lower part imports a higher one, inside functions included."""
    prefix = f"intentusnet.{part}"
    offenders = {
        module: _reaches(module, IMPORTS, banned)
        for module in IMPORTS
        if module == prefix or module.startswith(prefix + ".")
    }
    assert {m: found for m, found in offenders.items() if found} == {}


def test_the_log_imports_only_what_sits_below_it() -> None:
    """tlog/ imports only record/, hashing, _util and errors, and itself."""
    allowed = tuple(
        f"intentusnet.{part}"
        for part in ("tlog", "record", "hashing", "_util", "errors")
    )
    found = {
        target
        for module, targets in IMPORTS.items()
        if module.startswith("intentusnet.tlog")
        for target in targets
    }
    assert sorted(t for t in found if not t.startswith(allowed)) == []


def test_no_import_cycles() -> None:
    """No chain of imports in the package leads back to where it started."""
    assert _cycle(_graph(IMPORTS)) == []


def _package(root: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under ``root`` made of ``files`` (path: source)."""
    for name, source in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return root / "pkg"


@pytest.mark.parametrize(
    "source",
    [
        "def later():\n    from pkg import a\n",
        "import typing\nif typing.TYPE_CHECKING:\n    from pkg.a import A\n",
        "from .. import a\n",
        "import pkg.a\n",
    ],
    ids=["inside a function", "under TYPE_CHECKING", "relative submodule", "import"],
)
def test_cycle_check_finds_a_planted_cycle(tmp_path: Path, source: str) -> None:
    """The check reports a cycle closed by any kind of import, deferred ones too."""
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg.sub import b\n",
            "sub/__init__.py": "",
            "sub/b.py": source,
        },
    )
    assert _cycle(_graph(_imports(package))) == ["pkg.a", "pkg.sub.b", "pkg.a"]


def test_cycle_check_passes_imports_that_only_point_down(tmp_path: Path) -> None:
    """Names taken from a package, or a module importing its package, make no cycle."""
    package = _package(
        tmp_path,
        {
            "__init__.py": "from pkg.a import A\n",
            "a.py": "from pkg import b\nfrom pkg.c import C\nA = 1\n",
            "b.py": "import pkg\n",
            "c.py": "C = 2\n",
        },
    )
    graph = _graph(_imports(package))
    assert graph["pkg.a"] == {"pkg.b", "pkg.c"}
    assert _cycle(graph) == []


def test_top_level_modules_are_the_public_core() -> None:
    """Beside the folders, only the core modules sit at the top of the package."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == [
        "__init__.py",
        "envelope.py",
        "errors.py",
        "hashing.py",
        "replay.py",
    ]


def _folder(module: str) -> str:
    """The package folder a module sits in (a package is its own folder)."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    return module if path.is_dir() else module.rpartition(".")[0]


def _shared_modules(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each module imported from another folder, with the modules importing it."""
    users: dict[str, set[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            if _folder(target) != _folder(module):
                users.setdefault(target, set()).add(module)
    return users


SHARED = _shared_modules(_graph(IMPORTS))


def test_private_modules_stay_in_their_folder() -> None:
    """No ``_name`` module is imported from another folder (``_util/`` is shared)."""
    leaks = {
        target: sorted(users)
        for target, users in SHARED.items()
        if target.rpartition(".")[2].startswith("_")
        and target.rpartition(".")[2] != "_util"
    }
    assert leaks == {}


def test_modules_used_by_other_folders_declare_all() -> None:
    """Every module another folder imports names its public part in ``__all__``."""
    missing = []
    for target in sorted(SHARED):
        path = PACKAGE.parent.joinpath(*target.split("."))
        file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if file.name == "__init__.py":
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"))
        names = {
            t.id
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)
        }
        if "__all__" not in names:
            missing.append(target)
    assert missing == []
