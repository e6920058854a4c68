"""Every reading command against a PostgreSQL store named by a URL."""

from __future__ import annotations

from pathlib import Path

import orjson
import psycopg
import pytest
from pgkit import PASSWORD

from intentusnet.store import FileExecutionStore, PostgresExecutionStore

from .support import Invoke

#: Records of the ``ids`` fixture that verify (the tampered one is left out).
SOUND = ("completed", "failed", "fallback", "incomplete")


@pytest.fixture
def pg_ids(pg_dsn: str, store_root: Path, ids: dict[str, str]) -> dict[str, str]:
    """The sound records of ``ids``, imported byte for byte into ``pg_dsn``."""
    files = FileExecutionStore(store_root)
    with PostgresExecutionStore(pg_dsn) as pg:
        for kind in SOUND:
            pg.import_raw(ids[kind], files.raw(ids[kind]))
    files.close()
    return {kind: ids[kind] for kind in SOUND}


def _listed(invoke: Invoke, *args: str, **env: str) -> set[str]:
    result = invoke(*args, "records", "list", "--json", **env)
    assert result.exit_code == 0, result.output
    return {row["executionId"] for row in orjson.loads(result.stdout)}


def test_records_list_from_flag_and_environment(
    invoke: Invoke, pg_dsn: str, pg_ids: dict[str, str]
) -> None:
    """`records list` lists the database's records with --store and the variable."""
    assert _listed(invoke, "--store", pg_dsn) == set(pg_ids.values())
    assert _listed(invoke, INTENTUSNET_STORE=pg_dsn) == set(pg_ids.values())


def test_inspect_and_replay_match_the_file_store(
    invoke: Invoke, pg_dsn: str, store_root: Path, pg_ids: dict[str, str]
) -> None:
    """`inspect` and `replay` print the same bytes from PostgreSQL as from files."""
    for kind, execution_id in pg_ids.items():
        for command in (["inspect", execution_id, "--json"], ["replay", execution_id]):
            if kind == "incomplete" and command[0] == "replay":
                command.append("--force")
            from_pg = invoke("--store", pg_dsn, *command)
            from_files = invoke("--store", str(store_root), *command)
            assert from_pg.exit_code == from_files.exit_code == 0, from_pg.output
            assert from_pg.stdout == from_files.stdout, command
    assert invoke("--store", pg_dsn, "replay", pg_ids["incomplete"]).exit_code == 4


def test_verify_all_finds_a_line_changed_in_the_database(
    invoke: Invoke, pg_dsn: str, pg_ids: dict[str, str]
) -> None:
    """`verify --all` passes, then exits 6 naming a record whose line was edited."""
    clean = invoke("--store", pg_dsn, "verify", "--all", "--json")
    assert clean.exit_code == 0, clean.output
    assert orjson.loads(clean.stdout)["total"]["records"] == len(pg_ids)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE intentusnet_lines SET line = overlay(line placing 'X' from 30) "
            "WHERE execution_id = %s AND seq = 1",
            [pg_ids["completed"]],
        )
    result = invoke("verify", "--all", INTENTUSNET_STORE=pg_dsn)
    assert result.exit_code == 6
    flagged = [line for line in result.stdout.splitlines() if line.startswith("exec")]
    assert [line.split(":")[0] for line in flagged] == [pg_ids["completed"]]


def test_stats_names_the_server_not_the_password(
    invoke: Invoke, pg_dsn: str, pg_ids: dict[str, str]
) -> None:
    """`stats` counts the database's records; its Store line hides the password."""
    as_json = invoke("--store", pg_dsn, "stats", "--json")
    assert as_json.exit_code == 0, as_json.output
    assert orjson.loads(as_json.stdout)["records"] == len(pg_ids)
    text = invoke("--store", pg_dsn, "stats")
    assert text.stdout.splitlines()[0].startswith("Store:   PostgreSQL at 127.0.0.1:")
    assert PASSWORD not in text.output


def test_debug_resume_hint_drops_the_password(
    invoke: Invoke, pg_dsn: str, pg_ids: dict[str, str]
) -> None:
    """`debug`'s resume command names the URL without its password."""
    result = invoke("--store", pg_dsn, "debug", pg_ids["failed"])
    assert result.exit_code == 0, result.output
    assert f"--store {pg_dsn.replace(':' + PASSWORD, '')} rerun" in result.stdout
    assert PASSWORD not in result.output


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:pa%zzss-secret@db.example/records",
        "postgres://app:pass-secret@db.example:port/records",
        "postgresql://app:pass-secret@[::1/records",
    ],
)
def test_malformed_url_exits_2_without_the_password(invoke: Invoke, url: str) -> None:
    """A malformed URL is one line, exit 2, and shows no part of the password."""
    result = invoke("--store", url, "records", "list")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: malformed PostgreSQL URL postgres")
    assert result.stderr.count("\n") == 1
    assert "secret" not in result.output


def test_unreachable_server_is_a_store_error_without_the_password(
    invoke: Invoke,
) -> None:
    """Nothing listening: exit 1 naming host and port, never the password."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://app:{PASSWORD}@127.0.0.1:{port}/records"
    for args in (["records", "list"], ["--debug", "verify", "--all"]):
        result = invoke("--store", url, *args)
        assert result.exit_code == 1, result.output
        assert f"PostgreSQL at 127.0.0.1:{port}/records: could not connect" in (
            result.stderr
        )
        assert PASSWORD not in result.output
    assert "Traceback" not in invoke("--store", url, "stats").output


def test_writing_commands_work_on_the_database(
    invoke: Invoke, pg_dsn: str, pg_ids: dict[str, str]
) -> None:
    """`invalidate`, `reindex` and `prune` change the database's records."""
    done = invoke("--store", pg_dsn, "invalidate", "last", "--reason", "wrong")
    assert done.exit_code == 0, done.output
    assert invoke("--store", pg_dsn, "replay", "last").exit_code == 4
    reindexed = invoke("--store", pg_dsn, "reindex", "--json")
    assert orjson.loads(reindexed.stdout) == {"records": len(pg_ids), "changed": []}
    pruned = invoke("--store", pg_dsn, "prune", "--older-than", "0s", "--json")
    assert orjson.loads(pruned.stdout)["count"] == len(pg_ids)
    assert _listed(invoke, "--store", pg_dsn) == set()


def test_signed_records_in_the_database_from_the_command_line(
    invoke: Invoke, pg_dsn: str, tmp_path: Path
) -> None:
    """--signing-key signs an invalidation in PostgreSQL; verify --key checks it."""
    from recordkit import finished

    generated = invoke("keys", "generate", "--out", str(tmp_path / "k"), "--json")
    key = orjson.loads(generated.stdout)
    with PostgresExecutionStore(pg_dsn, signing_key=key["privateKey"]) as pg:
        execution_id = finished(pg)
    done = invoke(
        "--store",
        pg_dsn,
        "--signing-key",
        key["privateKey"],
        "invalidate",
        execution_id,
        "--reason",
        "stale",
    )
    assert done.exit_code == 0, done.output
    checked = invoke(
        "--store", pg_dsn, "verify", "--all", "--keys", str(tmp_path / "k")
    )
    assert checked.exit_code == 0, checked.output
    assert checked.stdout.splitlines()[-1].startswith("Signatures: 1 signed-valid")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM intentusnet_lines WHERE execution_id = %s AND seq = "
            "(SELECT max(seq) FROM intentusnet_lines WHERE execution_id = %s)",
            [execution_id, execution_id],
        )
    stripped = invoke("--store", pg_dsn, "verify", execution_id)
    assert stripped.exit_code == 6
    assert "closed without a signature" in stripped.stdout
