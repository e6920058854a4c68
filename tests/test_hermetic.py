"""Tests read nothing outside the repository: a fresh clone is all they need."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Text that names a place beside or above the checkout (the old sibling shared/).
OUTSIDE = ("../shared", "shared/vectors", "shared/tools", "/work/")


def _depth(node: ast.AST, here: int, names: dict[str, int]) -> int | None:
    """How many folders below the repository root the path ``node`` points, if known.

    ``here`` is the depth of the file holding ``node`` (``tests/x.py`` is 2); ``names``
    holds the depths of the paths assigned earlier in that file.
    """
    match node:
        case ast.Name(id="__file__"):
            return here
        case ast.Attribute(value=ast.Name(id="intentusnet"), attr="__file__"):
            return 2  # intentusnet/__init__.py
        case ast.Name(id=name):
            return names.get(name)
        case ast.Call(func=ast.Name(id="Path"), args=[inner]):
            return _depth(inner, here, names)
        case ast.Call(func=ast.Attribute(value=inner, attr="resolve" | "absolute")):
            return _depth(inner, here, names)
        case ast.Attribute(value=inner, attr="parent"):
            up = 1
        case ast.Subscript(
            value=ast.Attribute(value=inner, attr="parents"),
            slice=ast.Constant(value=int(index)),
        ):
            up = index + 1
        case ast.Call(
            func=ast.Attribute(
                value=ast.Attribute(value=ast.Name(id="os"), attr="path"),
                attr="dirname",
            ),
            args=[inner],
        ):
            up = 1
        case ast.BinOp(left=inner, op=ast.Div(), right=ast.Constant(value=str(part))):
            depth = _depth(inner, here, names)
            if depth is None:
                return None
            for piece in Path(part).parts:
                depth += -1 if piece == ".." else 1
                if depth < 0:
                    return depth
            return depth
        case _:
            return None
    depth = _depth(inner, here, names)
    return None if depth is None else depth - up


def outside_reads(source: str, relative: str) -> list[str]:
    """The lines of ``source`` (file ``relative``) naming a path outside the repository.

    Two kinds are found: a path built from ``__file__`` (``.parent``, ``.parents[n]``,
    ``os.path.dirname``, ``/ ".."``) that climbs above the repository root, directly or
    through a name it was assigned to; and a string naming the old sibling ``shared/``
    folder or an absolute ``/work/`` path.
    """
    tree = ast.parse(source)
    here = len(Path(relative).parts)
    names: dict[str, int] = {}
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    for assign in sorted(assigns, key=lambda n: n.lineno):
        depth = _depth(assign.value, here, names)
        for target in assign.targets:
            if isinstance(target, ast.Name) and depth is not None:
                names[target.id] = depth
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr):
            continue
        depth = _depth(node, here, names)
        if depth is not None and depth < 0:
            found.add(f"{relative}:{node.lineno}: climbs above the repository")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for text in OUTSIDE:
                if text in node.value:
                    found.add(f"{relative}:{node.lineno}: names {text!r}")
    return sorted(found)


def test_no_test_reads_outside_the_repository() -> None:
    """No test file or helper names a path beside or above the checkout."""
    this = Path(__file__).resolve()
    found = [
        line
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path != this  # this file names the texts it looks for
        for line in outside_reads(
            path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
        )
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "relative"),
    [
        ("ROOT = Path(__file__).parent.parent.parent\n", "tests/test_x.py"),
        ("ROOT = Path(__file__).resolve().parents[3]\n", "tests/store/test_x.py"),
        ("ROOT = Path(__file__).parents[1]\nTOOL = ROOT.parent / 'x'\n", "tests/t.py"),
        ("DOCS = Path(__file__).parent / '..' / '..' / 'docs'\n", "tests/test_x.py"),
        ("DOCS = Path(__file__).parent / '../../docs'\n", "tests/test_x.py"),
        (
            "HERE = os.path.dirname(__file__)\n"
            "UP = os.path.dirname(os.path.dirname(HERE))\n",
            "tests/test_x.py",
        ),
        ("UP = Path(intentusnet.__file__).parents[2]\n", "tests/test_x.py"),
        ("DATA = open('../shared/vectors/hashes.json')\n", "tests/test_x.py"),
        ("TOOL = Path('/work/tools/import-graph')\n", "tests/test_x.py"),
        ("def f():\n    return ROOT / 'shared/tools' / 'graph'\n", "tests/test_x.py"),
    ],
)
def test_checker_finds_a_planted_outside_read(source: str, relative: str) -> None:
    """A climb above the root or a name of the sibling shared/ folder is reported."""
    assert outside_reads(source, relative) != []


@pytest.mark.parametrize(
    ("source", "relative"),
    [
        ("ROOT = Path(__file__).parent.parent\nDOCS = ROOT / 'docs'\n", "tests/t.py"),
        ("ROOT = Path(__file__).resolve().parents[2]\n", "tests/store/test_x.py"),
        ("ROOT = Path(intentusnet.__file__).resolve().parents[1]\n", "tests/t.py"),
        ("DOCS = Path(__file__).parent / '..' / 'docs'\n", "tests/test_x.py"),
        ("store = tmp_path / 'shared'\n", "tests/test_x.py"),
    ],
)
def test_checker_passes_paths_inside_the_repository(source: str, relative: str) -> None:
    """Paths that stay at or below the repository root are not reported."""
    assert outside_reads(source, relative) == []
