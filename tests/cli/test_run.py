"""``intentusnet run``: route an envelope through an application's router."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from .support import NAMED_APP_SOURCE, Invoke, envelope, write_json


def test_run_prints_the_response(invoke: Invoke, app_dir: Path) -> None:
    """The echo agent's answer comes back as the response JSON."""
    file = write_json(app_dir / "env.json", envelope(text="hi"))
    result = invoke("run", "--app", "demo_app:router", str(file))
    assert result.exit_code == 0, result.output
    response = orjson.loads(result.stdout)
    assert response["status"] == "success"
    assert response["payload"] == {"echo": {"text": "hi"}}
    assert response["metadata"]["agent"] == "echo"


def test_run_reads_stdin(invoke: Invoke, app_dir: Path) -> None:
    """``-`` reads the envelope from stdin; --json prints one line."""
    data = orjson.dumps(envelope(n=1))
    result = invoke("run", "--app", "demo_app:router", "--json", "-", input=data)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1
    assert orjson.loads(result.stdout)["payload"] == {"echo": {"n": 1}}


def test_agent_failure_prints_the_response_and_exits_8(
    invoke: Invoke, app_dir: Path
) -> None:
    """An agent that raises: its error response is printed, and the exit code is 8."""
    file = write_json(app_dir / "env.json", envelope("boom"))
    result = invoke("run", "--app", "demo_app:router", str(file))
    assert result.exit_code == 8, result.output
    assert result.stderr == ""
    response = orjson.loads(result.stdout)
    assert response["status"] == "error"
    assert response["error"]["code"] == "AGENT_ERROR"


def test_invalid_envelope_exits_2(invoke: Invoke, app_dir: Path) -> None:
    """An envelope the model refuses is a usage error naming the field."""
    file = write_json(app_dir / "env.json", {"intent": {"name": ""}})
    result = invoke("run", "--app", "demo_app:router", str(file))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "intent.name" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_not_json_exits_2(invoke: Invoke, app_dir: Path) -> None:
    """Invalid JSON in the envelope file is one line and exit 2."""
    (app_dir / "env.json").write_text("{not json")
    result = invoke("run", "--app", "demo_app:router", "env.json")
    assert result.exit_code == 2
    assert "'env.json' is not valid JSON" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_json_array_exits_2(invoke: Invoke, app_dir: Path) -> None:
    """A JSON document that is not an object is refused."""
    write_json(app_dir / "env.json", [1, 2])
    result = invoke("run", "--app", "demo_app:router", "env.json")
    assert result.exit_code == 2
    assert "holds a array, not a JSON object" in result.stderr


def test_missing_file_exits_2(invoke: Invoke, app_dir: Path) -> None:
    """A missing envelope file is one line and exit 2."""
    result = invoke("run", "--app", "demo_app:router", "missing.json")
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: cannot read envelope file 'missing.json': No such file or directory\n"
    )


def test_directory_as_file_exits_2(invoke: Invoke, app_dir: Path) -> None:
    """A directory given as the envelope file cannot be read: exit 2."""
    result = invoke("run", "--app", "demo_app:router", str(app_dir))
    assert result.exit_code == 2
    assert "Is a directory" in result.stderr


def test_bad_app_reference_exits_2(invoke: Invoke, app_dir: Path) -> None:
    """--app without a colon, a missing module or attribute, or a non-router."""
    write_json(app_dir / "env.json", envelope())
    cases = {
        "demo_app": "--app must be MODULE:ATTR",
        "no_such_module:router": "cannot import 'no_such_module'",
        "demo_app:missing": "no attribute 'missing'",
        "demo_app:not_a_router": "is a int, not an IntentRouter",
    }
    for ref, message in cases.items():
        result = invoke("run", "--app", ref, "env.json")
        assert result.exit_code == 2, ref
        assert message in result.stderr, ref
        assert len(result.stderr.splitlines()) == 1, ref


def test_app_raising_on_import_exits_1(invoke: Invoke, app_dir: Path) -> None:
    """An app whose import raises: exit 1, one line; --debug adds the traceback."""
    (app_dir / "demo_app_broken.py").write_text("import nowhere_to_be_found\n")
    write_json(app_dir / "env.json", envelope())
    result = invoke("run", "--app", "demo_app_broken:router", "env.json")
    assert result.exit_code == 1
    assert "importing 'demo_app_broken' failed: ModuleNotFoundError" in result.stderr
    assert "Traceback" not in result.stderr
    result = invoke("--debug", "run", "--app", "demo_app_broken:router", "env.json")
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr


def _listed(invoke: Invoke, store: str) -> list[str]:
    result = invoke("--store", store, "records", "list", "--json")
    assert result.exit_code == 0, result.output
    return [row["executionId"] for row in orjson.loads(result.stdout)]


def test_store_option_records_a_router_without_a_store(
    invoke: Invoke, app_dir: Path
) -> None:
    """--store gives a router without a store one: a new directory, then replay."""
    file = write_json(app_dir / "env.json", envelope(text="kept"))
    root = app_dir / "new-store"
    result = invoke("--store", str(root), "run", "--app", "demo_app:router", str(file))
    assert result.exit_code == 0, result.output
    execution_id = orjson.loads(result.stdout)["metadata"]["executionId"]
    assert _listed(invoke, str(root)) == [execution_id]
    replayed = invoke("--store", str(root), "replay", execution_id)
    assert replayed.exit_code == 0, replayed.output
    assert orjson.loads(replayed.stdout)["payload"] == {"echo": {"text": "kept"}}
    assert not (app_dir / ".intentusnet").exists()


def test_an_app_on_open_store_follows_the_store_option(
    invoke: Invoke, app_dir: Path
) -> None:
    """An app built on open_store() records where --store says, not by default."""
    (app_dir / "demo_app_named.py").write_text(NAMED_APP_SOURCE)
    file = write_json(app_dir / "env.json", envelope())
    root = app_dir / "from-option"
    result = invoke(
        "--store", str(root), "run", "--app", "demo_app_named:router", str(file)
    )
    assert result.exit_code == 0, result.output
    assert len(_listed(invoke, str(root))) == 1
    assert not (app_dir / ".intentusnet").exists()


def test_router_recording_elsewhere_is_a_usage_error(
    invoke: Invoke, app_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A router with its own store and another --store: exit 2, nothing routed."""
    own, named = app_dir / "own", app_dir / "named"
    monkeypatch.setenv("DEMO_STORE", str(own))
    file = write_json(app_dir / "env.json", envelope())
    result = invoke(
        "run", "--app", "demo_app:router", str(file), INTENTUSNET_STORE="named"
    )
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: --store/INTENTUSNET_STORE names {named.resolve()}, "
        f"but demo_app:router records to {own.resolve()}; name the store once: "
        "drop --store and INTENTUSNET_STORE to use the application's store, or "
        "build the router with IntentRouter(store=intentusnet.open_store()) so "
        "that it follows them\n"
    )
    assert not own.exists()
    assert not named.exists()


def test_same_directory_named_twice_is_one_store(
    invoke: Invoke, app_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--store naming the router's own directory (relative or not) is no conflict."""
    monkeypatch.setenv("DEMO_STORE", str(app_dir / "records"))
    file = write_json(app_dir / "env.json", envelope())
    result = invoke("--store", "records", "run", "--app", "demo_app:router", str(file))
    assert result.exit_code == 0, result.output
    assert len(_listed(invoke, "records")) == 1


def test_integers_beyond_2_53_are_refused_as_in_the_library(
    invoke: Invoke, app_dir: Path, tmp_path: Path
) -> None:
    """A 30-digit integer is exit 2 with the library's error; nothing is recorded."""
    from intentusnet import IntentEnvelope
    from intentusnet.errors import EnvelopeValidationError

    huge = 123456789012345678901234567890
    try:
        IntentEnvelope.model_validate(
            {"intent": {"name": "echo"}, "payload": {"n": huge}}
        )
    except EnvelopeValidationError as exc:
        expected = f"Error: {exc}\n"
    (app_dir / "env.json").write_bytes(
        b'{"intent": {"name": "echo"}, "payload": {"n": %d}}' % huge
    )
    store = tmp_path / "recorded"
    result = invoke(
        "run", "--app", "demo_app:router", "env.json", DEMO_STORE=str(store)
    )
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == expected
    assert not list(store.glob("*/*.jsonl"))
