"""Execution stores: where records are kept (DESIGN §5).

``ExecutionStore`` is the protocol the router and the CLI use;
``FileExecutionStore`` keeps records as files with a SQLite catalog, and
``MemoryExecutionStore`` keeps them in memory, for tests.
"""

from typing import TYPE_CHECKING

from .file import DEFAULT_ROOT as DEFAULT_ROOT
from .file import Durability as Durability
from .file import FileExecutionStore as FileExecutionStore
from .memory import MemoryExecutionStore as MemoryExecutionStore
from .protocol import ExecutionStore as ExecutionStore
from .protocol import RecordWriter as RecordWriter

__all__ = [
    "DEFAULT_ROOT",
    "Durability",
    "ExecutionStore",
    "FileExecutionStore",
    "MemoryExecutionStore",
    "RecordWriter",
]

if TYPE_CHECKING:

    def _conforms(
        file: FileExecutionStore, memory: MemoryExecutionStore
    ) -> tuple[ExecutionStore, ExecutionStore, RecordWriter, RecordWriter]:
        # mypy holds both stores and their writers to the protocols here.
        return (
            file,
            memory,
            file.open({}, envelope_hash=""),
            memory.open({}, envelope_hash=""),
        )
