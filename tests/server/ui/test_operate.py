"""Every parked execution has a lever: inspect, pages and docs name it; it works.

Each reason of ``PARK_REASONS`` is reached as a real execution reaches it (a child
process killed, then a resume or recovery: ``parks.py``); the buttons themselves are
clicked in ``test_operate_browser.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from intentusnet import FileExecutionStore, RecordStatus, fork
from intentusnet.cli import cli
from intentusnet.record.durable import PARK_REASONS, parked_commands
from intentusnet.server.ui import create_ui_app

from .parks import CALLS, ORDER, parked, router_of

DOCS = Path(__file__).parents[3] / "docs" / "durability.md"
#: The lever each reason's execution is moved on with, as inspect prints it.
FIRST_LEVER = {
    "side_effect_in_doubt": (
        "intentusnet resolve {id} --step 2 --happened --output JSON"
    ),
    "nondeterminism": "intentusnet fork {id} --from 1 --app MODULE:ATTR",
    "attempts_exhausted": "intentusnet resolve {id} --not-happened",
}
#: Resolutions refused for each reason (exit 4, nothing written): args, reason.
REFUSED = {
    "side_effect_in_doubt": [(("--not-happened",), "wrong_step")],
    "nondeterminism": [
        (("--step", "1", "--not-happened"), "not_in_doubt"),
        (("--not-happened",), "not_in_doubt"),
    ],
    "attempts_exhausted": [
        (("--happened",), "not_in_doubt"),
        (("--step", "2", "--not-happened"), "wrong_step"),
    ],
}


def _section(title: str) -> str:
    text = DOCS.read_text()
    start = text.index(f"## {title}")
    return text[start : text.index("\n## ", start + 1)]


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("reason", PARK_REASONS)
def test_every_park_reason_names_its_lever_and_the_lever_moves_it(
    tmp_path: Path, reason: str
) -> None:
    """inspect, the page and the docs name the lever; refusals exit 4; it works."""
    where = str(tmp_path / "records")
    execution = parked(where, reason)
    store = FileExecutionStore(where)
    attention = next(
        e.data
        for e in store.load(execution).events
        if e.type.value == "ATTENTION_NEEDED"
    )
    wanted = parked_commands(execution, attention)
    assert wanted[0] == FIRST_LEVER[reason].format(id=execution)
    assert wanted[-1] == f"intentusnet cancel {execution}"

    code, shown, _ = _cli("--store", where, "inspect", execution)
    assert code == 0
    printed = [
        line.split(":", 1)[1].strip()
        for line in shown.splitlines()
        if line.strip().startswith("to move it on:")
    ]
    assert printed == wanted
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/ui/executions/{execution}").text
    said = re.search(r'id="parked-commands">(.*?)</p>', page, re.S)
    assert said is not None
    for command in wanted:
        assert f"<code>{command}</code>" in said.group(1)
        assert f'data-copy="{command}"' in page  # the Operate section, read-only
    assert 'action="/ui/executions/' not in page.replace("/invalidate", "")
    docs = _section("When an execution is parked")
    assert f"`{reason}`" in docs
    generic = wanted[0].replace(execution, "ID").replace("--step 2", "--step N")
    assert f"`{generic.replace('--from 1', '--from N')}`" in docs

    before = len(store.list())
    for args, why in REFUSED[reason]:
        code, out, err = _cli("--store", where, "resolve", execution, *args)
        assert (code, out) == (4, ""), (args, err)
        assert f"({why})" in err
        assert "Traceback" not in err
    assert len(store.list()) == before  # nothing written

    CALLS.clear()
    with router_of(store, audited=reason == "nondeterminism") as router:
        if reason == "nondeterminism":
            assert "fork it from step 1" in err
            moved = fork(router, execution, 1)
            finished = router.store.load(str(moved.execution_id))  # type: ignore[union-attr]
        else:
            step = ("--step", "2", "--happened", "--output", '"sent"')
            args = step if reason == "side_effect_in_doubt" else ("--not-happened",)
            code, decision, err = _cli("--store", where, "resolve", execution, *args)
            assert code == 0, err
            answer = router.resume(decision.strip())
            finished = router.store.load(str(answer.metadata.execution_id))  # type: ignore[union-attr]
    assert finished.header.status is RecordStatus.COMPLETED
    assert finished.final_response["payload"] == {"total": 20, "mail": "sent"}  # type: ignore[index]
    # the e-mail in doubt is not sent again; one that never started is sent once;
    # the fetch, ended before every kill, is served (a fork runs it, from step 1)
    assert (
        dict(CALLS)
        == {
            "side_effect_in_doubt": {},
            "attempts_exhausted": {"email": 1},
            "nondeterminism": {"audit": 1, "fetch": 1, "email": 1},
        }[reason]
    )
    store.close()


def test_the_levers_forms_keep_the_explorers_guard(tmp_path: Path) -> None:
    """Another origin is 403, no key goes to the login; intentusnet ui has no forms."""
    from livekit import ROUTE_KEY, keyed_app

    store = FileExecutionStore(tmp_path / "records")
    with router_of(store) as router:
        done = str(router.route_intent(ORDER).metadata.execution_id)
        url = f"/ui/executions/{done}/fork"
        with TestClient(keyed_app(router), base_url="http://127.0.0.1") as client:
            key = {"Authorization": f"Bearer {ROUTE_KEY}"}
            elsewhere = client.post(
                url, data={"from": "1"}, headers={**key, "Origin": "http://evil.test"}
            )
            anonymous = client.post(url, data={"from": "1"}, follow_redirects=False)
            assert len(store.list()) == 1  # nothing written
            forked = client.post(url, data={"from": "1"}, headers=key)
        with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as alone:
            absent = alone.post(url, data={"from": "1"})
    assert elsewhere.status_code == 403
    assert "explorer&#39;s own pages" in elsewhere.text
    assert anonymous.status_code == 303
    assert anonymous.headers["location"].startswith("/ui/login?next=")
    assert forked.status_code == 200  # followed to the fork's page
    assert len(store.list()) == 2
    assert absent.status_code in (404, 405)
    store.close()


def test_try_it_again_from_the_page_records_a_retry(tmp_path: Path) -> None:
    """attempts_exhausted: the page offers Try it again; posted, a retry is recorded."""
    from livekit import ROUTE_KEY, keyed_app

    where = str(tmp_path / "records")
    execution = parked(where, "attempts_exhausted")
    store = FileExecutionStore(where)
    key = {"Authorization": f"Bearer {ROUTE_KEY}"}
    with (
        router_of(store) as router,
        TestClient(keyed_app(router), base_url="http://127.0.0.1") as client,
    ):
        page = client.get(f"/ui/executions/{execution}", headers=key).text
        tried = client.post(
            f"/ui/executions/{execution}/resolve",
            data={"happened": "no"},
            headers=key,
            follow_redirects=False,
        )
        again = client.post(
            f"/ui/executions/{execution}/resolve", data={"happened": "no"}, headers=key
        )
    assert ">Try it again</button>" in page
    assert 'action="/ui/executions/' in page
    assert tried.status_code == 303
    decision = tried.headers["location"].rsplit("/", 1)[1]
    [event] = [
        e.data
        for e in store.load(decision).events
        if e.type.value == "OPERATOR_DECISION"
    ]
    assert (event["action"], event["via"], event["reason"]) == (
        "retry",
        "ui",
        "attempts_exhausted",
    )
    assert "step" not in event
    assert again.status_code == 409  # another decision came first
    assert "resolve_refused" in again.text
    store.close()
