"""Execution stores: where records are kept (DESIGN §5).

``ExecutionStore`` is the protocol the router and the CLI use;
``FileExecutionStore`` keeps records as files with a SQLite catalog, and
``MemoryExecutionStore`` keeps them in memory, for tests, and
``PostgresExecutionStore`` keeps them in PostgreSQL (the ``postgres`` extra).
``open_store(name)`` opens either from a path or a ``postgresql://`` URL.

Names load lazily (PEP 562): ``intentusnet replay ID`` imports the file store
alone, not the memory store or the protocol.
"""

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

# name -> module of this package that defines it
_EXPORTS: dict[str, str] = {
    "DEFAULT_ROOT": "file",
    "Durability": "file",
    "ExecutionStore": "protocol",
    "FileExecutionStore": "file",
    "ListFilters": "filters",
    "MemoryExecutionStore": "memory",
    "PostgresExecutionStore": "postgres",
    "RecordWriter": "protocol",
    "open_store": "naming",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .file import DEFAULT_ROOT as DEFAULT_ROOT
    from .file import Durability as Durability
    from .file import FileExecutionStore as FileExecutionStore
    from .filters import ListFilters as ListFilters
    from .memory import MemoryExecutionStore as MemoryExecutionStore
    from .naming import open_store as open_store
    from .postgres import PostgresExecutionStore as PostgresExecutionStore
    from .protocol import ExecutionStore as ExecutionStore
    from .protocol import RecordWriter as RecordWriter

    def _conforms(
        file: FileExecutionStore,
        memory: MemoryExecutionStore,
        postgres: PostgresExecutionStore,
    ) -> tuple[
        ExecutionStore,
        ExecutionStore,
        ExecutionStore,
        RecordWriter,
        RecordWriter,
        RecordWriter,
    ]:
        # mypy holds every store and its writer to the protocols here.
        return (
            file,
            memory,
            postgres,
            file.open({}, envelope_hash=""),
            memory.open({}, envelope_hash=""),
            postgres.open({}, envelope_hash=""),
        )


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
