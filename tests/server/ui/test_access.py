"""Signing in to the explorer with a key, and invalidating with a write key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from livekit import READ_KEY, ROUTE_KEY, echo_router, keyed_app

from intentusnet.server.ui import create_ui_app
from intentusnet.server.ui.access import COOKIE
from intentusnet.store import FileExecutionStore


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    """The service with a route key and a read key, and one echo record."""
    with echo_router(tmp_path / "records") as router:
        answer = router.route_intent({"intent": {"name": "echo"}, "payload": {}})
        with TestClient(keyed_app(router), base_url="https://testserver") as client:
            yield client, answer.metadata.execution_id


def _login(client: TestClient, key: str) -> None:
    answer = client.post(
        "/ui/login", data={"key": key, "next": "/ui"}, follow_redirects=False
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui"


def test_login_sets_a_cookie_for_ui_paths_only(keyed: tuple[TestClient, str]) -> None:
    """A valid key becomes an HttpOnly, SameSite=Strict cookie for /ui only."""
    client, _ = keyed
    assert client.get("/ui", follow_redirects=False).status_code == 303
    _login(client, READ_KEY)
    header = client.post(
        "/ui/login", data={"key": READ_KEY}, follow_redirects=False
    ).headers["set-cookie"]
    assert f"{COOKIE}=" in header
    assert "HttpOnly" in header
    assert "Path=/ui" in header
    assert "SameSite=strict" in header
    assert "Secure" in header
    assert client.get("/ui").status_code == 200
    # the JSON API never takes the cookie
    assert client.get("/v1/executions").status_code == 401


def test_wrong_key_and_logout(keyed: tuple[TestClient, str]) -> None:
    """A wrong key is refused on the page; signing out drops the cookie."""
    client, _ = keyed
    wrong = client.post("/ui/login", data={"key": "x" * 20})
    assert wrong.status_code == 401
    assert 'id="problem"' in wrong.text
    _login(client, READ_KEY)
    assert "Sign out" in client.get("/ui").text
    client.post("/ui/logout", follow_redirects=False)
    assert client.get("/ui", follow_redirects=False).status_code == 303


def test_login_never_redirects_elsewhere(keyed: tuple[TestClient, str]) -> None:
    """``next`` outside the explorer is ignored: no open redirect."""
    client, _ = keyed
    for target in ("https://evil.example/", "//evil.example/ui", "/v1/executions"):
        answer = client.post(
            "/ui/login", data={"key": READ_KEY, "next": target}, follow_redirects=False
        )
        assert answer.headers["location"] == "/ui"


def test_read_key_cannot_invalidate(keyed: tuple[TestClient, str]) -> None:
    """A read-only key sees no form, and a posted one is refused."""
    client, execution_id = keyed
    _login(client, READ_KEY)
    assert 'id="invalidate"' not in client.get(f"/ui/executions/{execution_id}").text
    refused = client.post(
        f"/ui/executions/{execution_id}/invalidate", data={"reason": "x"}
    )
    assert refused.status_code == 403


def test_write_key_invalidates(keyed: tuple[TestClient, str]) -> None:
    """A routing key invalidates from the page; the record then says so."""
    client, execution_id = keyed
    _login(client, ROUTE_KEY)
    page = client.get(f"/ui/executions/{execution_id}").text
    assert 'id="invalidate"' in page
    foreign = client.post(
        f"/ui/executions/{execution_id}/invalidate",
        data={"reason": "wrong answer"},
        headers={"Origin": "https://evil.example"},
    )
    assert foreign.status_code == 403
    assert (
        client.post(
            f"/ui/executions/{execution_id}/invalidate", data={"reason": " "}
        ).status_code
        == 422
    )
    done = client.post(
        f"/ui/executions/{execution_id}/invalidate",
        data={"reason": "wrong answer"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    after = client.get(f"/ui/executions/{execution_id}").text
    assert "manually_invalidated" in after
    assert 'id="invalidate"' not in after
    listed = client.get("/ui?replayable=no").text
    assert "no: manually_<wbr>invalidated" in listed
    assert execution_id in listed


def test_ui_command_app_is_read_only(tmp_path: Path) -> None:
    """The explorer alone has no invalidation route and no login."""
    with echo_router(tmp_path / "records") as router:
        execution_id = router.route_intent(
            {"intent": {"name": "echo"}}
        ).metadata.execution_id
    store = FileExecutionStore(tmp_path / "records")
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        assert (
            'id="invalidate"' not in client.get(f"/ui/executions/{execution_id}").text
        )
        posted = client.post(
            f"/ui/executions/{execution_id}/invalidate", data={"reason": "x"}
        )
        assert posted.status_code in (404, 405)
        login = client.get("/ui/login", follow_redirects=False)
        assert login.headers["location"] == "/ui"
    store.close()
