"""The explorer's pages, rendered in-process: content, filters, escaping, errors."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from livekit import READ_KEY, echo_router, keyed_app, serving

from intentusnet import KeyRing, SigningKey
from intentusnet.server.ui.pages import PAGE_SIZE

from .sample import HOSTILE


def _ids(html: str) -> list[str]:
    return re.findall(r'<tr data-id="([^"]+)"', html)


def test_records_newest_first(client: TestClient, ids: dict[str, str]) -> None:
    """The list shows every record, newest first, each linking to its page."""
    page = client.get("/ui")
    assert page.status_code == 200
    shown = _ids(page.text)
    assert set(ids.values()) <= set(shown)
    created = re.findall(r'<time datetime="([^"]+)"', page.text)
    assert created == sorted(created, reverse=True)
    assert f'href="/ui/executions/{ids["steps"]}"' in page.text


def test_records_filters(client: TestClient, ids: dict[str, str]) -> None:
    """Intent, status, replayable and the time range narrow the list."""
    assert _ids(client.get("/ui?status=failed").text) == [ids["failed"]]
    summarize = set(_ids(client.get("/ui?intent=summarize").text))
    assert summarize == {ids["fallback"], ids["failed"]}
    assert _ids(client.get("/ui?replayable=no").text) == []
    assert len(_ids(client.get("/ui?replayable=yes").text)) >= len(ids)
    assert _ids(client.get("/ui?until=2000-01-01T00:00").text) == []
    assert _ids(client.get("/ui?since=2999-01-01T00:00:00").text) == []


def test_search_by_id_opens_the_record(client: TestClient, ids: dict[str, str]) -> None:
    """A whole id opens its page; an id's start or a whole hash filters the list."""
    found = client.get(f"/ui?q={ids['hostile']}", follow_redirects=False)
    assert found.status_code == 303
    assert found.headers["location"] == f"/ui/executions/{ids['hostile']}"
    assert _ids(client.get(f"/ui?q={ids['failed'][:-1]}").text) == [ids["failed"]]
    assert set(_ids(client.get("/ui?q=exec-").text)) >= set(ids.values())
    # the start of an id, not any part of it
    assert _ids(client.get(f"/ui?q={ids['failed'][-12:]}").text) == []
    record = client.get(f"/ui/executions/{ids['steps']}").text
    envelope_hash = re.search(r"sha256:[0-9a-f]{64}", record)
    assert envelope_hash is not None
    runs = _ids(client.get(f"/ui?q={envelope_hash.group().upper()}").text)
    assert ids["steps"] in runs
    assert ids["failed"] not in runs


def test_search_says_what_it_matches(client: TestClient) -> None:
    """Part of a hash, or text no id can start with, is refused with the reason."""
    part = client.get("/ui?q=sha256:abc")
    assert part.status_code == 422
    assert "sha256: and 64 lowercase hex digits" in part.text
    odd = client.get("/ui?q=no/such")
    assert odd.status_code == 422
    assert "cannot start an execution id" in odd.text
    assert client.get("/ui?replayable=maybe").status_code == 422


def test_until_is_exclusive(client: TestClient, ids: dict[str, str]) -> None:
    """Until lists the records created before it, not at it."""
    listed = client.get("/ui").text
    created = re.search(
        rf'<tr data-id="{ids["failed"]}">.*?<time datetime="([^"]+)"', listed, re.S
    )
    assert created is not None
    before = set(_ids(client.get(f"/ui?until={created.group(1)}").text))
    assert ids["failed"] not in before
    assert ids["echo0"] in before  # recorded earlier


def test_cursor_pages_stay_put(
    client: TestClient, sample: tuple[object, dict[str, str]]
) -> None:
    """Pages follow the service's cursors; records added meanwhile do not shift them."""
    from intentusnet import IntentRouter
    from intentusnet.store import FileExecutionStore

    root = sample[0]
    store = FileExecutionStore(root)  # type: ignore[arg-type]
    with IntentRouter(store=store) as router:
        router.agent("bulk", name="bulk")(lambda env, ctx: {})
        for n in range(PAGE_SIZE + 5):
            router.route_intent({"intent": {"name": "bulk"}, "payload": {"n": n}})
        first = client.get("/ui?intent=bulk").text
        cursor = re.search(r'rel="next" href="/ui\?([^"]+)"', first)
        assert cursor is not None
        router.route_intent({"intent": {"name": "bulk"}, "payload": {"n": "late"}})
        second = client.get("/ui?" + cursor.group(1).replace("&amp;", "&")).text
    store.close()
    one, two = _ids(first), _ids(second)
    assert len(one) == PAGE_SIZE
    assert len(two) == 5
    assert not set(one) & set(two)
    assert 'rel="next"' not in second


def test_execution_page(client: TestClient, ids: dict[str, str]) -> None:
    """Header, badges, verification, a bar per attempt and step, commands."""
    page = client.get(f"/ui/executions/{ids['steps']}").text
    assert "replayable" in page
    assert re.search(r"(\d+)/\1 lines verified", page)
    assert page.count('class="bar attempt') == 1
    assert page.count('class="bar step') == 2
    assert page.count('class="bar child') == 1
    assert f"intentusnet replay {ids['steps']}" in page
    assert "unsigned" in page


def test_execution_page_fallback_and_errors(
    client: TestClient, ids: dict[str, str]
) -> None:
    """A fallback shows two attempt bars, a marker and the failure's traceback."""
    page = client.get(f"/ui/executions/{ids['fallback']}").text
    assert page.count('class="bar attempt') == 2
    assert 'class="marker"' in page
    assert "ConnectionError" in page
    assert "Traceback (most recent call last)" in page
    failed = client.get(f"/ui/executions/{ids['failed']}").text
    assert "Why it failed" in failed


def test_hostile_payload_is_text(client: TestClient, ids: dict[str, str]) -> None:
    """Script tags in a payload are escaped, and the page forbids inline script."""
    response = client.get(f"/ui/executions/{ids['hostile']}")
    assert "<script>window" not in response.text
    assert "&lt;script&gt;window.__pwned" in response.text
    assert HOSTILE not in response.text
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]


def test_diff_page(client: TestClient, ids: dict[str, str]) -> None:
    """Two runs side by side, the deviation point marked; ticked rows work too."""
    page = client.get(f"/ui/diff?a={ids['steps']}&b={ids['steps2']}").text
    assert 'id="deviation"' in page
    assert "crm.lookup" in page
    ticked = client.get(f"/ui/diff?id={ids['echo0']}&id={ids['echo1']}").text
    assert 'id="verdict"' in ticked
    assert client.get("/ui/diff").status_code == 200


def test_cache_hits_shown(client: TestClient, ids: dict[str, str]) -> None:
    """A record that answered from the cache lists the hit it served."""
    page = client.get(f"/ui/executions/{ids['cached']}").text
    assert "Cache hits it served (1)" in page


def test_overview(client: TestClient, ids: dict[str, str]) -> None:
    """Counts by status and intent, and a daily chart with the hit rate."""
    page = client.get("/ui/overview").text
    assert "%</td>" in page
    assert "By status" in page
    assert "crm.qualify" in page
    assert page.count('class="hbar') > 3


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/ui/executions/exec-nope", 404),
        ("/ui/executions/.hidden", 404),
        ("/ui?status=bogus", 422),
        ("/ui?since=yesterday", 422),
        ("/ui?cursor=garbage", 422),
        ("/ui/diff?a=exec-x&b=exec-y", 404),
    ],
)
def test_errors_are_pages(client: TestClient, url: str, status: int) -> None:
    """A missing record or a bad filter is an HTML page with the right status."""
    response = client.get(url)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert 'id="problem"' in response.text


def test_static_files_ship(client: TestClient) -> None:
    """The stylesheet and the script come from the package, not a CDN."""
    assert "prefers-color-scheme: dark" in client.get("/ui/static/ui.css").text
    assert "clipboard" in client.get("/ui/static/ui.js").text
    icon = client.get("/ui/static/favicon.svg")
    assert icon.status_code == 200
    assert icon.headers["content-type"].startswith("image/svg+xml")
    page = client.get("/ui").text
    assert '<link rel="icon" href="/ui/static/favicon.svg"' in page
    assert "http://" not in page
    assert "https://" not in page


def test_not_loopback_is_refused(sample: tuple[object, dict[str, str]]) -> None:
    """The explorer alone answers only callers on loopback."""
    from intentusnet.server.ui import create_ui_app
    from intentusnet.store import FileExecutionStore

    store = FileExecutionStore(sample[0])  # type: ignore[arg-type]
    with TestClient(create_ui_app(store), base_url="http://192.0.2.1") as remote:
        assert remote.get("/ui").status_code == 403
    store.close()


def test_serve_mounts_the_explorer_behind_read_keys(tmp_path: object) -> None:
    """Under serve, /ui needs a key like the JSON API; a read-only key is enough."""
    from pathlib import Path

    with (
        echo_router(Path(str(tmp_path)) / "records") as router,
        serving(keyed_app(router)) as live,
        httpx.Client(base_url=live.url, trust_env=False) as http,
    ):
        refused = http.get("/ui?intent=x")
        assert refused.status_code == 303
        assert refused.headers["location"] == "/ui/login?next=%2Fui%3Fintent%3Dx"
        headers = {"Authorization": f"Bearer {READ_KEY}"}
        assert http.get("/ui", headers=headers).status_code == 200
        assert http.get("/ui/static/ui.css").status_code == 200
        assert "/ui" not in http.get("/openapi.json", headers=headers).text


def test_damaged_record_is_not_shown(tmp_path: object) -> None:
    """A record whose chain breaks shows its verification failures, not its content."""
    from pathlib import Path

    from intentusnet.server.ui import create_ui_app
    from intentusnet.store import FileExecutionStore

    root = Path(str(tmp_path)) / "records"
    with echo_router(root) as router:
        execution_id = router.route_intent(
            {"intent": {"name": "echo"}, "payload": {"secret": "plain-secret"}}
        ).metadata.execution_id
    (path,) = root.glob(f"*/{execution_id}.jsonl")
    path.write_bytes(path.read_bytes().replace(b'"plain-secret"', b'"edited-secret"'))
    store = FileExecutionStore(root)
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/ui/executions/{execution_id}")
    store.close()
    assert page.status_code == 409
    assert "lines verified" in page.text
    # words no hex id or hash can hold: the content is not shown
    assert "edited-secret" not in page.text


def signed_store(root: Path) -> tuple[SigningKey, dict[str, str]]:
    """A store of records signed by one key, one resealed after signing."""
    from recordkit import change_answer, finished, record_file, reseal

    from intentusnet.store import FileExecutionStore

    key = SigningKey.generate()
    store = FileExecutionStore(root, signing_key=key)
    ids = {"good": finished(store, "good"), "forged": finished(store, "forged")}
    path = record_file(store, ids["forged"])
    path.write_bytes(reseal(path.read_bytes(), change_answer("forged answer")))
    store.close()
    return key, ids


def test_record_page_checks_signatures_with_trusted_keys(tmp_path: Path) -> None:
    """Verified, invalid, unknown key, and unchecked without keys, each said."""
    from intentusnet.server.ui import create_ui_app
    from intentusnet.store import FileExecutionStore

    root = tmp_path / "records"
    key, ids = signed_store(root)
    store = FileExecutionStore(root)

    def badge(ring: KeyRing | None, execution_id: str) -> tuple[str, str]:
        app = create_ui_app(store, signature_keys=ring)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            html = client.get(f"/ui/executions/{execution_id}").text
        found = re.search(r'id="signature" data-state="([^"]+)"[^>]*>([^<]+)<', html)
        assert found is not None, html
        return found.group(1), found.group(2)

    ring = KeyRing([key.public_key])
    key_id = key.key_id
    assert badge(ring, ids["good"]) == (
        "signed-valid",
        f"signed by key {key_id}, verified",
    )
    assert badge(ring, ids["forged"]) == ("signed-invalid", "signature invalid")
    other = KeyRing([SigningKey.generate().public_key])
    assert badge(other, ids["good"]) == ("unknown-key", f"key unknown: {key_id}")
    assert badge(None, ids["good"]) == (
        "unchecked",
        f"signed by key {key_id}, not checked",
    )
    store.close()


def test_an_unsigned_record_says_so(client: TestClient, ids: dict[str, str]) -> None:
    """A record of a store without a signing key reads as unsigned."""
    html = client.get(f"/ui/executions/{ids['echo0']}").text
    assert 'data-state="unsigned"' in html


class _Crash(BaseException):
    """Stands for the routing process dying: the record is closed unfinished."""


def test_execution_pages_link_an_interrupted_record_and_its_resume(
    tmp_path: Path,
) -> None:
    """The interrupted record names its resumer, and the resume names it back."""
    from intentusnet import IntentRouter
    from intentusnet.server.ui import create_ui_app
    from intentusnet.store import FileExecutionStore

    store = FileExecutionStore(tmp_path / "records")
    router = IntentRouter(store=store)
    crash = {"on": True}

    @router.agent("job")
    def job(env, ctx):  # type: ignore[no-untyped-def]
        ctx.step("first", {"n": 1}, lambda n: n)
        if crash["on"]:
            raise _Crash
        return {"done": True}

    with pytest.raises(_Crash):
        router.route_intent({"intent": {"name": "job"}, "payload": {}})
    [old] = [s.execution_id for s in store.list()]
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        waiting = client.get(f"/ui/executions/{old}").text
        crash["on"] = False
        new = router.resume(old).metadata.execution_id
        interrupted = client.get(f"/ui/executions/{old}").text
        resumed = client.get(f"/ui/executions/{new}").text
    router.close()

    assert f"intentusnet resume {old}" in waiting
    assert f'finished by <a class="id mono" href="/ui/executions/{new}"' in interrupted
    assert f'href="/ui/executions/{old}" title="{old}">{old}</a> (attempt 1)' in (
        resumed
    )


def _shown_text(html: str) -> str:
    """The page's text as first drawn: no closed <details>, no bar details, no tags."""
    html = re.sub(r"<template.*?</template>", "", html, flags=re.S)
    html = re.sub(r"<details(?![^>]*\bopen)[^>]*>.*?</details>", "", html, flags=re.S)
    return re.sub(r"<[^>]+>", "", html)


def test_a_parked_execution_reads_as_parked(tmp_path: Path) -> None:
    """Parked: its status class, a parked badge, no replayable one, the reason once."""
    from intentusnet.server.ui import create_ui_app
    from intentusnet.store import FileExecutionStore

    from .long_sample import make_long_store

    ids = make_long_store(tmp_path / "records")
    store = FileExecutionStore(tmp_path / "records")
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/ui/executions/{ids['parked']}").text
        listed = client.get("/ui?status=needs_attention").text
        done = client.get(f"/ui/executions/{ids['spent']}").text
    store.close()
    badges = re.search(r'<p class="badges">(.*?)</p>', page, re.S)
    assert badges is not None
    assert 'class="status status-needs_attention"' in badges.group(1)
    assert 'id="parked-badge"' in badges.group(1)
    assert "replayable" not in badges.group(1)
    message = "it may or may not have happened"
    assert message in re.sub(r"<[^>]+>", "", page)  # it is there ...
    assert _shown_text(page).count(message) == 1  # ... and said once
    assert "side_effect_in_doubt" in _shown_text(page)
    # the commands that move it on, for its step in doubt
    resolve = f"intentusnet resolve {ids['parked']} --step 1"
    commands = re.search(r'<p class="note parked" id="parked-commands">(.*?)</p>', page)
    assert commands is not None
    assert re.findall(r"<code>(.*?)</code>", commands.group(1)) == [
        f"{resolve} --happened --output JSON",
        f"{resolve} --not-happened",
        f"intentusnet cancel {ids['parked']}",
    ]
    # in the list: its row marked parked, no replayable word, its status coloured
    row = re.search(
        rf'<tr data-id="{ids["parked"]}" class="parked">(.*?)</tr>', listed, re.S
    )
    assert row is not None
    assert 'class="status status-needs_attention">needs_<wbr>attention' in row.group(1)
    replay = re.search(r'<td class="c-replay">(.*?)</td>', row.group(1), re.S)
    assert replay is not None
    assert "yes" not in replay.group(1)
    assert "no" not in re.sub(r"<[^>]+>", "", replay.group(1))
    # a finished execution keeps its replayable badge
    assert "replayable</span>" in done
    assert 'id="parked-badge"' not in done
    assert 'id="parked-commands"' not in done
