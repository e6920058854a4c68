"""The records list's search by value within one intent (server/ui/search.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from intentusnet.errors import RequestInvalid
from intentusnet.server.ui import search
from intentusnet.server.ui.search import ValueQuery, value_query


def _listed(html: str) -> list[str]:
    return re.findall(r'<tr data-id="([^"]+)">', html)


def test_finds_a_record_by_a_nested_payload_value(
    llm_client: TestClient, llm_sample: tuple[Path, dict[str, str]]
) -> None:
    """payload.customer.email=... lists exactly that run, and says what it read."""
    ids = llm_sample[1]
    page = llm_client.get(
        "/ui",
        params={"intent": "chat.answer", "q": "payload.customer.email=bob@example.com"},
    )
    assert page.status_code == 200
    assert _listed(page.text) == [ids["cached"]]
    note = re.sub(
        r"\s+", " ", re.sub(r"<[^>]+>", "", page.text.split('id="scan-note"')[1])
    )
    assert "Read 4 records of intent chat.answer" in note
    assert "1 matched" in note
    assert "Every record the filters select was read." in note


def test_a_list_matches_by_any_item_and_numbers_by_their_json(
    llm_client: TestClient, llm_sample: tuple[Path, dict[str, str]]
) -> None:
    """A list matches by any item; true matches a JSON true, not the text True."""
    ids = llm_sample[1]
    by_tag = llm_client.get(
        "/ui", params={"intent": "chat.answer", "q": "payload.tags=vip"}
    )
    assert _listed(by_tag.text) == [ids["spent"]]
    failing = llm_client.get(
        "/ui", params={"intent": "chat.answer", "q": "payload.fail=true"}
    )
    assert _listed(failing.text) == [ids["failed"]]
    cased = llm_client.get(
        "/ui", params={"intent": "chat.answer", "q": "payload.fail=True"}
    )
    assert _listed(cased.text) == []


def test_no_match_is_an_empty_list(llm_client: TestClient) -> None:
    """A value no record holds lists nothing (and is no error)."""
    page = llm_client.get(
        "/ui", params={"intent": "chat.answer", "q": "payload.customer.email=nobody"}
    )
    assert page.status_code == 200
    assert _listed(page.text) == []
    assert "No records match." in page.text


def test_a_search_by_value_needs_an_intent(llm_client: TestClient) -> None:
    """Without an intent the page refuses, saying why (it would read every record)."""
    page = llm_client.get("/ui", params={"q": "payload.tags=vip"})
    assert page.status_code == 422
    assert "choose the intent to search in" in page.text


def test_the_scan_is_bounded_and_continues_older(
    llm_client: TestClient,
    llm_sample: tuple[Path, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At most SCAN_LIMIT records a page; the next page reads on from there."""
    ids = llm_sample[1]
    monkeypatch.setattr(search, "SCAN_LIMIT", 2)
    query = {"intent": "chat.answer", "q": "payload.customer.email=ada@example.com"}
    first = llm_client.get("/ui", params=query)
    assert _listed(first.text) == []
    assert "Read 2 records" in first.text
    older = re.search(
        r'href="(/ui\?[^"]*cursor=[^"]+)">search older records', first.text
    )
    assert older is not None
    second = llm_client.get(older.group(1).replace("&amp;", "&"))
    assert _listed(second.text) == [ids["spent"]]


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("payload.a.b=1", ValueQuery(("payload", "a", "b"), "1")),
        ("metadata.source=cli=x", ValueQuery(("metadata", "source"), "cli=x")),
        ("context.tags=", ValueQuery(("context", "tags"), "")),
        ("exec-01a2", None),
        ("sha256:ab", None),
    ],
)
def test_value_query_syntax(text: str, parsed: ValueQuery | None) -> None:
    """PATH=VALUE below payload, metadata or context; text without = is not one."""
    assert value_query(text) == parsed


def test_a_path_with_an_empty_part_is_refused() -> None:
    """payload=x and payload..a=x name no value: refused with an example."""
    for text in ("payload=x", "payload..a=x"):
        with pytest.raises(RequestInvalid, match="needs a path below payload"):
            value_query(text)


def test_a_path_elsewhere_is_refused_with_the_syntax(llm_client: TestClient) -> None:
    """customer.email=x (no root) is refused, the page showing the right form."""
    page = llm_client.get(
        "/ui", params={"intent": "chat.answer", "q": "customer.email=x"}
    )
    assert page.status_code == 422
    assert "a search by value names a path below payload, metadata or context" in (
        page.text
    )
