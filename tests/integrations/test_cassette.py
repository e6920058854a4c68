"""HTTPCassette on its own: the modes, the names and the store, without pytest's help.

A real ``httpx.HTTPTransport`` sends through ``HTTPCassette.send`` (as the
plugin's replaced ``handle_request`` does) to the fake API on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from intentusnet import (
    CacheMiss,
    HTTPCassette,
    HTTPInteraction,
    RecordMode,
    RequestNotRecorded,
)
from intentusnet.integrations.cassette import cassette_name

from .fakeapi import API_KEY, FakeAPI

ORIGINAL = httpx.HTTPTransport.handle_request


class _AnyId:
    """Equal to any execution id."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith("exec-")


ANY_ID = _AnyId()


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """The fake API, running; stopped after the test."""
    with FakeAPI() as server:
        yield server


@pytest.fixture
def transport() -> Iterator[httpx.HTTPTransport]:
    """The transport a client would have built."""
    made = httpx.HTTPTransport()
    yield made
    made.close()


def ask(url: str, prompt: str) -> httpx.Request:
    return httpx.Request(
        "POST",
        f"{url}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": prompt}]},
        headers={"authorization": f"Bearer {API_KEY}"},
    )


def send(cassette: HTTPCassette, transport, request: httpx.Request) -> httpx.Response:
    response = cassette.send("httpx", ORIGINAL, transport, request)
    assert isinstance(response, httpx.Response)
    response.read()
    return response


def test_record_modes_map_onto_the_transport_modes(tmp_path: Path, api, transport):
    """once records a new cassette and replays a recorded one; none only replays."""
    path = tmp_path / "c"
    first = HTTPCassette(path, "once", cache_dir=tmp_path / "k1")
    assert (first.existed, first.transport_mode.value) == (False, "cache")
    answer = send(first, transport, ask(api.url, "hi"))
    assert answer.json()["choices"][0]["message"]["content"] == "echo hi t=None"
    assert first.interactions == [
        HTTPInteraction("POST", f"{api.url}/v1/chat/completions", "miss", ANY_ID)
    ]
    first.close()
    again = HTTPCassette(path, RecordMode.ONCE, cache_dir=tmp_path / "k2")
    assert (again.existed, again.transport_mode.value) == (True, "replay")
    assert send(again, transport, ask(api.url, "hi")).headers[
        "x-intentusnet-cache"
    ] == ("hit")
    assert (again.hits, again.misses, api.hits) == (1, 0, 1)
    assert again.record_ids() == [first.interactions[0].record]
    again.close()
    assert (
        HTTPCassette(path, "all", cache_dir=tmp_path / "k3").transport_mode == "record"
    )
    assert (
        HTTPCassette(path, "new_episodes", cache_dir=tmp_path / "k4").transport_mode
        == "cache"
    )


def test_rewrite_empties_the_cassette_and_records_anew(tmp_path: Path, api, transport):
    """rewrite deletes the records held, then records as once on a new cassette."""
    path = tmp_path / "c"
    first = HTTPCassette(path, "once", cache_dir=tmp_path / "k1")
    send(first, transport, ask(api.url, "hi"))
    first.close()
    old = first.record_ids()
    again = HTTPCassette(path, "rewrite", cache_dir=tmp_path / "k2")
    assert (again.existed, again.transport_mode.value) == (False, "cache")
    assert again.record_ids() == []
    states = [send(again, transport, ask(api.url, "hi")).headers["x-intentusnet-cache"]]
    states.append(
        send(again, transport, ask(api.url, "hi")).headers["x-intentusnet-cache"]
    )
    again.close()
    assert states == ["miss", "hit"]
    assert api.hits == 2
    (new,) = again.record_ids()
    assert new not in old
    # the derived data went to the cache directory, not the cassette
    assert (tmp_path / "k2" / "catalog" / "catalog.sqlite3").is_file()
    assert (tmp_path / "k2" / "replay-cache").is_dir()
    assert sorted(p.suffix for p in path.rglob("*") if p.is_file()) == [".jsonl"]


def test_a_refused_request_names_itself_and_the_cassette(
    tmp_path: Path, api, transport
):
    """Mode none on no cassette: RequestNotRecorded (a CacheMiss), no directory made."""
    path = tmp_path / "missing"
    cassette = HTTPCassette(path, "none", cache_dir=tmp_path / "k")
    with pytest.raises(RequestNotRecorded) as caught:
        send(cassette, transport, ask(api.url, "hi"))
    cassette.close()
    error = caught.value
    assert isinstance(error, CacheMiss)
    assert error.code == "request_not_recorded"
    assert (error.cassette, error.record_mode) == (str(path), "none")
    assert error.request == f"POST {api.url}/v1/chat/completions"
    assert str(error).startswith(
        f"POST {api.url}/v1/chat/completions is not in the cassette {path} "
    )
    assert api.hits == 0
    assert not path.exists()


def test_cassette_names() -> None:
    """Names keep letters, digits and ``_.-[]``; long ones are cut with a hash."""
    assert cassette_name("test_x[a/b c]", "TestA") == "TestA.test_x[a-b-c]"
    long_a = cassette_name("test_" + "a" * 300 + "1")
    long_b = cassette_name("test_" + "a" * 300 + "2")
    assert len(long_a) == 120
    assert long_a != long_b


def test_cassette_refuses_unknown_mode_and_options(tmp_path: Path) -> None:
    """HTTPCassette names the bad mode or option and lists the valid ones."""
    with pytest.raises(
        ValueError,
        match=r"unknown record mode 'twice'; use one of 'once', 'new_episodes', "
        r"'none', 'all', 'rewrite'$",
    ):
        HTTPCassette(tmp_path / "c", "twice", cache_dir=tmp_path / "k")
    with pytest.raises(ValueError, match="unknown cassette option store"):
        HTTPCassette(
            tmp_path / "c", "once", cache_dir=tmp_path / "k", options={"store": 1}
        )
    assert RecordMode.parse("new_episodes") is RecordMode.NEW_EPISODES
