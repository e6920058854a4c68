"""Every command against a PostgreSQL store named by a URL: reading, run, rerun."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import psycopg
import pytest
from pgkit import PASSWORD, PgServer

from intentusnet.store import FileExecutionStore, PostgresExecutionStore

from .support import (
    CRM_APP,
    CRM_EXAMPLE,
    CRM_REQUEST,
    NAMED_APP_SOURCE,
    Invoke,
    envelope,
    forget_crm_app,
    write_json,
)

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


def test_records_list_filters_match_the_file_store(
    invoke: Invoke, pg_dsn: str, store_root: Path, pg_ids: dict[str, str]
) -> None:
    """--until, --replayable, --id-prefix and --hash list the same from both stores."""

    def rows(store: str, *options: str) -> list[dict[str, str]]:
        result = invoke("--store", store, "records", "list", "--json", *options)
        assert result.exit_code == 0, result.output
        listed = orjson.loads(result.stdout)
        assert isinstance(listed, list)
        return listed

    def ids(store: str, *options: str) -> list[str]:
        return [row["executionId"] for row in rows(store, *options)]

    sound = set(pg_ids.values())  # the file store also holds a tampered record
    newest = rows(pg_dsn, "--limit", "1")[0]
    same_hash = newest["envelopeHash"]
    for options in (
        ["--until", newest["createdUtc"]],
        ["--replayable"],
        ["--not-replayable"],
        ["--id-prefix", pg_ids["fallback"][:-2]],
        ["--hash", same_hash],
        ["--hash", same_hash, "--not-replayable"],
        ["--until", "2999-01-01", "--replayable", "--id-prefix", "exec-"],
    ):
        from_files = [i for i in ids(str(store_root), *options) if i in sound]
        assert ids(pg_dsn, *options) == from_files, options
    before = ids(pg_dsn, "--until", newest["createdUtc"])
    assert len(before) == len(sound) - 1
    assert newest["executionId"] not in before
    assert ids(pg_dsn, "--id-prefix", pg_ids["fallback"]) == [pg_ids["fallback"]]


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


# -- run and rerun: recording into the database ----------------------------------

#: An application recording to the PostgreSQL store ``$APP_PG`` of its own.
PG_APP_SOURCE = """
import os
from intentusnet import IntentRouter, PostgresExecutionStore

router = IntentRouter(store=PostgresExecutionStore(os.environ["APP_PG"]))
router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
"""


def _where(dsn: str) -> str:
    with PostgresExecutionStore(dsn) as store:
        return store.where


def _second_database(pg_server: PgServer, pg_dsn: str) -> str:
    """Another empty database on the same server as ``pg_dsn``."""
    name = pg_dsn.rsplit("/", 1)[1] + "_other"
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return pg_server.dsn(name)


def _ids_in(dsn: str) -> list[str]:
    with PostgresExecutionStore(dsn) as store:
        return [summary.execution_id for summary in store.list()]


def test_run_records_into_the_database(
    invoke: Invoke, app_dir: Path, pg_dsn: str, store_root: Path
) -> None:
    """`--store URL run` records in PostgreSQL; list and replay find it; no files."""
    file = write_json(app_dir / "env.json", envelope(text="to the database"))
    result = invoke("--store", pg_dsn, "run", "--app", "demo_app:router", str(file))
    assert result.exit_code == 0, result.output
    execution_id = orjson.loads(result.stdout)["metadata"]["executionId"]
    assert _listed(invoke, "--store", pg_dsn) == {execution_id}
    replayed = invoke("replay", execution_id, INTENTUSNET_STORE=pg_dsn)
    assert replayed.exit_code == 0, replayed.output
    assert orjson.loads(replayed.stdout)["payload"] == {
        "echo": {"text": "to the database"}
    }
    verified = invoke("--store", pg_dsn, "verify", execution_id)
    assert verified.exit_code == 0, verified.output
    assert _listed(invoke, "--store", str(store_root)) == set()
    assert not (app_dir / ".intentusnet").exists()


def test_run_with_the_variable_and_an_app_on_open_store(
    invoke: Invoke, app_dir: Path, pg_dsn: str
) -> None:
    """INTENTUSNET_STORE=URL: an app built on open_store() records in PostgreSQL."""
    (app_dir / "demo_app_named.py").write_text(NAMED_APP_SOURCE)
    file = write_json(app_dir / "env.json", envelope(n=1))
    result = invoke(
        "run", "--app", "demo_app_named:router", str(file), INTENTUSNET_STORE=pg_dsn
    )
    assert result.exit_code == 0, result.output
    execution_id = orjson.loads(result.stdout)["metadata"]["executionId"]
    assert _ids_in(pg_dsn) == [execution_id]
    assert not (app_dir / ".intentusnet").exists()


def test_run_with_a_malformed_url_exits_2_before_importing_the_app(
    invoke: Invoke, app_dir: Path
) -> None:
    """A malformed URL is refused (exit 2, no password) before the app is imported."""
    (app_dir / "demo_app_named.py").write_text(NAMED_APP_SOURCE)
    file = write_json(app_dir / "env.json", envelope())
    url = "postgresql://app:pass-secret@127.0.0.1:port/records"
    result = invoke("--store", url, "run", "--app", "demo_app_named:router", str(file))
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: malformed PostgreSQL URL postgresql://app@")
    assert "secret" not in result.output
    assert "demo_app_named" not in sys.modules


def test_run_refuses_a_router_recording_to_files(
    invoke: Invoke,
    app_dir: Path,
    pg_dsn: str,
    store_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A file-store router and --store URL: exit 2 naming both, no password."""
    monkeypatch.setenv("DEMO_STORE", str(store_root))
    file = write_json(app_dir / "env.json", envelope())
    result = invoke("--store", pg_dsn, "run", "--app", "demo_app:router", str(file))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"Error: --store/INTENTUSNET_STORE names {_where(pg_dsn)}, "
        f"but demo_app:router records to {store_root.resolve()}; name the store once"
    )
    assert "intentusnet.open_store()" in result.stderr
    assert PASSWORD not in result.output
    assert _ids_in(pg_dsn) == []
    assert _listed(invoke, "--store", str(store_root)) == set()


def test_run_refuses_another_database_and_takes_the_same_one(
    invoke: Invoke,
    app_dir: Path,
    pg_server: PgServer,
    pg_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another database is a conflict; the same one, spelled postgres://, is not."""
    (app_dir / "demo_app_pg.py").write_text(PG_APP_SOURCE)
    monkeypatch.setenv("APP_PG", pg_dsn)
    file = write_json(app_dir / "env.json", envelope())
    other = _second_database(pg_server, pg_dsn)
    refused = invoke("--store", other, "run", "--app", "demo_app_pg:router", str(file))
    assert refused.exit_code == 2
    assert (
        f"names {_where(other)}, but demo_app_pg:router records to {_where(pg_dsn)};"
        in refused.stderr
    )
    assert PASSWORD not in refused.output
    same = pg_dsn.replace("postgresql://", "postgres://", 1)
    result = invoke("--store", same, "run", "--app", "demo_app_pg:router", str(file))
    assert result.exit_code == 0, result.output
    assert len(_ids_in(pg_dsn)) == 1
    assert _ids_in(other) == []


@pytest.fixture
def crm_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The debugging example importable from the working directory, with no store."""
    directory = tmp_path / "crm"
    directory.mkdir()
    shutil.copyfile(CRM_EXAMPLE, directory / "debug_fix_replay.py")
    monkeypatch.chdir(directory)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("CRM_STORE", raising=False)
    monkeypatch.delenv("CRM_FIXED", raising=False)
    forget_crm_app()
    yield directory
    forget_crm_app()


def _route_crm(invoke: Invoke, dsn: str, directory: Path, email: str) -> str:
    """Route the example's request for ``email`` into the database; its id."""
    request = {**CRM_REQUEST, "payload": {"email": email}}
    file = write_json(directory / "request.json", request)
    result = invoke("--store", dsn, "run", "--app", CRM_APP, str(file))
    response = orjson.loads(result.stdout)
    # run exits 8 when the execution failed (the example fails for grace@x.io)
    assert result.exit_code == (8 if response["status"] == "error" else 0)
    forget_crm_app()
    return str(response["metadata"]["executionId"])


def test_strict_rerun_serves_the_steps_from_the_database(
    invoke: Invoke, crm_app: Path, pg_dsn: str
) -> None:
    """`--store URL rerun` answers every step from PostgreSQL and records there."""
    original = _route_crm(invoke, pg_dsn, crm_app, "ada@example.com")
    result = invoke("--store", pg_dsn, "rerun", "last", "--app", CRM_APP, "--json")
    assert result.exit_code == 0, result.output
    done = orjson.loads(result.stdout)
    assert done["originalExecutionId"] == original
    assert (done["mode"], done["status"]) == ("strict", "success")
    assert done["served"] == ["crm.lookup", "email.send", "crm.score"]
    assert done["ran"] == []
    assert done["diff"]["same"] is True
    app = sys.modules["debug_fix_replay"]
    assert app.CALLS == {"crm": 0, "model": 0}  # nothing asked of the CRM or model
    assert app.MAILBOX == []  # the e-mail was not sent again
    assert set(_ids_in(pg_dsn)) == {original, done["executionId"]}
    shown = invoke("--store", pg_dsn, "inspect", done["executionId"])
    assert f"replay of:   {original}" in shown.stdout
    assert not (crm_app / ".intentusnet").exists()


def test_rerun_misses_then_resumes_against_the_database(
    invoke: Invoke, crm_app: Path, pg_dsn: str
) -> None:
    """Fixed lookup live, strictly: scoring misses (7); from the root cause: runs."""
    failed = _route_crm(invoke, pg_dsn, crm_app, "grace@x.io")
    store = ("--store", pg_dsn)
    miss = invoke(
        *store, "rerun", failed, "--app", CRM_APP, "--live", "1", CRM_FIXED="1"
    )
    assert miss.exit_code == 7
    assert "step 'crm.score'" in miss.stderr
    assert PASSWORD not in miss.output
    forget_crm_app()
    missed = miss.stderr.split("(the re-run's record: ", 1)[1].split(")", 1)[0]
    assert set(_ids_in(pg_dsn)) == {failed, missed}
    resumed = invoke(
        *store,
        "rerun",
        failed,
        "--app",
        CRM_APP,
        "--from-root-cause",
        "--json",
        CRM_FIXED="1",
    )
    assert resumed.exit_code == 0, resumed.output
    done = orjson.loads(resumed.stdout)
    assert (done["served"], done["ran"]) == (
        ["email.send"],
        ["crm.lookup", "crm.score"],
    )
    assert done["status"] == "success"
    app = sys.modules["debug_fix_replay"]
    assert (app.MAILBOX, app.CALLS["crm"]) == ([], 1)  # the e-mail: served
    assert set(_ids_in(pg_dsn)) == {failed, missed, done["executionId"]}
    assert invoke(*store, "rerun", "exec-missing", "--app", CRM_APP).exit_code == 3


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
