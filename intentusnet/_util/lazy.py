"""Package names imported on first use (PEP 562): start-up loads only what runs."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping

__all__ = [
    "lazy_exports",
]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: MutableMapping[str, object]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """Return a module's ``__getattr__`` and ``__dir__`` for names loaded on first use.

    ``__getattr__`` imports ``exports[name]``: ``exports`` maps each name to the
    submodule of ``package`` that defines it; the value found is stored in
    ``namespace`` (the package's globals), so later lookups do not come back here.
    ``__dir__`` lists ``namespace`` and the names not loaded yet.
    """

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return [*namespace, *exports]

    return __getattr__, __dir__
