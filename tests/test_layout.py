"""The package's layout rules (docs/architecture.md): imports point down, no cycles."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "intentusnet"


def _module(package: Path, path: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _target(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module ``from x import ...`` in ``module`` (at ``path``) names as ``x``."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    up = base[: len(base) - node.level + 1]
    return ".".join([*up, *([node.module] if node.module else [])])


def _imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Every package module and the package names it imports, anywhere in it.

    Imports inside functions and under ``TYPE_CHECKING`` count: the walk visits every
    node. ``from x import name`` yields both ``x`` and ``x.name``.
    """
    found: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        module = _module(package, path)
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = _target(module, path, node)
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
    missing = [
        target
        for target in sorted(SHARED)
        if _file(PACKAGE, target).name != "__init__.py"
        and _declared(_file(PACKAGE, target)) is None
    ]
    assert missing == []


def _file(package: Path, module: str) -> Path:
    """The source of ``module``: a package's is its ``__init__.py``."""
    path = package.parent.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _names(node: ast.expr | None, bound: dict[str, ast.expr]) -> set[str]:
    """The strings ``node`` lists, through ``sorted()``, ``*x`` and the module's names.

    ``__all__ = sorted(_EXPORTS)`` lists the keys of the dict ``_EXPORTS`` holds.
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Name):
        return _names(bound[node.id], bound)
    if isinstance(node, ast.Starred):
        return _names(node.value, bound)
    if isinstance(node, ast.Call) and len(node.args) == 1:
        return _names(node.args[0], bound)
    assert isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict), ast.dump(node)
    items = node.keys if isinstance(node, ast.Dict) else node.elts
    return set().union(*(_names(item, bound) for item in items))


@functools.cache
def _declared(file: Path) -> set[str] | None:
    """The names ``__all__`` lists in ``file``, or None where it has no ``__all__``."""
    bound: dict[str, ast.expr] = {}
    for node in ast.parse(file.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update((t.id, node.value) for t in targets if isinstance(t, ast.Name))
    return _names(bound["__all__"], bound) if "__all__" in bound else None


def _top(package: Path, module: str) -> str:
    """The top-level folder ``module`` sits in (``store``), "" for the core modules."""
    parts = module.split(".")[1:]
    return parts[0] if parts and package.joinpath(parts[0]).is_dir() else ""


def _undeclared(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Each ``module.name`` imported from another top-level folder that ``module``'s
    ``__all__`` leaves out, with the modules importing it.

    Modules are found by their path, so a folder's inner layout (``store/file/``)
    needs no list here; a submodule imported by name (``from x import y``) is a
    module, held by the check above, not a name of ``x``.
    """
    modules = {_module(package, path) for path in package.rglob("*.py")}
    found: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        user = _module(package, path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _target(user, path, node)
            if target not in modules or _top(package, target) == _top(package, user):
                continue
            declared = _declared(_file(package, target)) or set()
            for alias in node.names:
                name = f"{target}.{alias.name}"
                if name not in modules and alias.name not in declared:
                    found.setdefault(name, set()).add(user)
    return {name: sorted(users) for name, users in sorted(found.items())}


def test_names_used_by_other_folders_are_in_all() -> None:
    """Every name a module of another top-level folder imports is in ``__all__``."""
    assert _undeclared() == {}


def test_all_check_finds_names_left_out(tmp_path: Path) -> None:
    """Names imported across top-level folders but left out of ``__all__`` are found.

    Imports inside functions count; inside a folder, submodules and listed names
    pass.
    """
    package = _package(
        tmp_path,
        {
            "__init__.py": '_EXPORTS = {"A": "core.a"}\n__all__ = sorted(_EXPORTS)\n',
            "errors.py": '__all__ = ["Listed"]\nListed = Hidden = 1\n',
            "core/__init__.py": '__all__ = [*["A"]]\nA = 1\n',
            "core/a.py": '__all__ = ("A",)\nA = B = _c = 1\n',
            "core/inner/b.py": "from ..a import B\nfrom pkg.errors import Hidden\n",
            "up/c.py": (
                "from pkg import A, errors\nfrom pkg.core import A as A2, a\n"
                "from ..core.a import A as A3, B\nfrom pkg.errors import Listed\n"
                "def later():\n    from pkg.core.a import _c\n"
            ),
        },
    )
    assert _undeclared(package) == {
        "pkg.core.a.B": ["pkg.up.c"],
        "pkg.core.a._c": ["pkg.up.c"],
        "pkg.errors.Hidden": ["pkg.core.inner.b"],
    }
