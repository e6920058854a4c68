"""`intentusnet copy SRC DST`: verified, byte-for-byte, idempotent copies."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from intentusnet import ListFilters, compute_hash
from intentusnet.store import FileExecutionStore, PostgresExecutionStore

from .support import Invoke, envelope, record_file


@pytest.fixture
def sound(store_root: Path, ids: dict[str, str]) -> dict[str, str]:
    """The ``ids`` store without its tampered record: every record verifies."""
    with FileExecutionStore(store_root) as store:
        store.delete(ids.pop("tampered"))  # its file and its row
    with FileExecutionStore(store_root) as store:
        store.reindex()
    return ids


def _copy(invoke: Invoke, *args: str) -> tuple[int, dict[str, object]]:
    result = invoke("copy", *args, "--json")
    return result.exit_code, orjson.loads(result.stdout)


def _raw(name: str | Path, execution_id: str) -> bytes:
    if isinstance(name, str) and name.startswith("postgresql://"):
        with PostgresExecutionStore(name) as pg:
            return pg.raw(execution_id)
    return FileExecutionStore(name).raw(execution_id)


def test_file_to_postgres_and_back_keeps_every_byte(
    invoke: Invoke, store_root: Path, sound: dict[str, str], pg_dsn: str, tmp_path: Path
) -> None:
    """file -> PostgreSQL -> file: same bytes, same verify and replay output."""
    back = tmp_path / "back"
    code, there = _copy(invoke, str(store_root), pg_dsn)
    assert (code, there["copied"], there["failed"]) == (0, len(sound), 0)
    code, home = _copy(invoke, pg_dsn, str(back))
    assert (code, home["copied"]) == (0, len(sound))
    for execution_id in sound.values():
        original = _raw(store_root, execution_id)
        assert _raw(pg_dsn, execution_id) == original
        assert record_file(back, execution_id).read_bytes() == original
    replay = ["replay", sound["completed"], "--json"]
    outputs = {invoke("--store", str(s), *replay).stdout for s in (store_root, back)}
    outputs.add(invoke("--store", pg_dsn, *replay).stdout)
    assert len(outputs) == 1
    for name in (pg_dsn, str(back)):
        assert invoke("--store", name, "verify", "--all").exit_code == 0


def test_second_copy_skips_everything(
    invoke: Invoke, store_root: Path, sound: dict[str, str], pg_dsn: str
) -> None:
    """Run twice, the second copy writes nothing and skips every record."""
    assert _copy(invoke, str(store_root), pg_dsn)[0] == 0
    code, again = _copy(invoke, str(store_root), pg_dsn)
    assert code == 0
    assert again == {
        "copied": 0,
        "skipped": len(sound),
        "conflicts": 0,
        "failed": 0,
        "notes": [],
    }


def test_tampered_source_record_is_refused(
    invoke: Invoke, store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """A record failing verification is not written; the others are; exit 6."""
    dst = tmp_path / "dst"
    result = invoke("copy", str(store_root), str(dst))
    assert result.exit_code == 6
    assert result.stderr == ""  # no progress when not on a terminal
    assert f"{ids['tampered']}: failed: line 2: hash mismatch" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        f"Copied {len(ids) - 1}, skipped 0, 0 conflicts, 1 failed."
    )
    assert not FileExecutionStore(dst).exists(ids["tampered"])


def test_conflict_is_reported_and_not_overwritten(
    invoke: Invoke, tmp_path: Path
) -> None:
    """Another record under the same id in DST is a conflict (exit 1), left alone."""
    stores = [FileExecutionStore(tmp_path / name) for name in ("src", "dst")]
    for store, text in zip(stores, ("one", "two"), strict=True):
        wire = envelope(text=text)
        store.open(wire, envelope_hash=compute_hash(wire), execution_id="same").close()
        store.close()
    before = stores[1].raw("same")
    code, done = _copy(invoke, str(tmp_path / "src"), str(tmp_path / "dst"))
    assert code == 1
    assert done["conflicts"] == 1
    assert done["notes"] == [
        {
            "executionId": "same",
            "outcome": "conflict",
            "reason": "DST holds other bytes under this id",
        }
    ]
    assert stores[1].raw("same") == before


def test_id_copies_only_the_records_named(
    invoke: Invoke, store_root: Path, sound: dict[str, str], tmp_path: Path
) -> None:
    """--id copies those records only ('last' too); an unknown id exits 3."""
    dst = tmp_path / "dst"
    code, done = _copy(invoke, str(store_root), str(dst), "--id", sound["failed"])
    assert (code, done["copied"]) == (0, 1)
    assert list(FileExecutionStore(dst).iter_ids()) == [sound["failed"]]
    missing = invoke("copy", str(store_root), str(dst), "--id", "exec-missing")
    assert missing.exit_code == 3
    newest = FileExecutionStore(store_root).list(ListFilters(limit=1))[0].execution_id
    assert _copy(invoke, str(store_root), str(dst), "--id", "last")[0] == 0
    assert FileExecutionStore(dst).exists(newest)


def test_missing_source_exits_2_and_creates_nothing(
    invoke: Invoke, tmp_path: Path
) -> None:
    """A SRC directory that does not exist is a usage error; DST is not made."""
    result = invoke("copy", str(tmp_path / "nope"), str(tmp_path / "dst"))
    assert result.exit_code == 2
    assert "no execution store at" in result.stderr
    assert not (tmp_path / "dst").exists()


def test_record_being_written_is_skipped(
    invoke: Invoke, store_root: Path, sound: dict[str, str], tmp_path: Path
) -> None:
    """A record a live writer still holds is skipped with a note, not cut short."""
    store = FileExecutionStore(store_root)
    wire = envelope(text="live")
    writer = store.open(wire, envelope_hash=compute_hash(wire))
    try:
        code, done = _copy(invoke, str(store_root), str(tmp_path / "dst"))
    finally:
        writer.close()
        store.close()
    assert (code, done["copied"], done["skipped"]) == (0, len(sound), 1)
    assert done["notes"] == [
        {
            "executionId": writer.execution_id,
            "outcome": "skipped",
            "reason": "still being written",
        }
    ]
