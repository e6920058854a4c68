"""The package's layout rules (docs/architecture.md): imports point down, no cycles."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "intentusnet"
IMPORT_GRAPH = ROOT.parent / "shared" / "tools" / "import-graph"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """Every package module and the package modules it imports, anywhere in it."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = _module(path)
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
        found[module] = {t for t in targets if t.startswith("intentusnet")}
    return found


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
        ("envelope", "record"),
        ("hashing", "envelope"),
        ("_util", "record"),
        ("_util", "envelope"),
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


def test_no_import_cycles() -> None:
    """The shared import-graph tool finds no cycle in the package."""
    if not IMPORT_GRAPH.exists():
        pytest.fail(f"{IMPORT_GRAPH} is missing: the repository's sibling shared/")
    done = subprocess.run(
        [sys.executable, str(IMPORT_GRAPH), str(PACKAGE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0 cycles" in done.stdout


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
