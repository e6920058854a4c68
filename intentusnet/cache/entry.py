"""A cached answer: how it is stored on disk and checked against its record.

On disk (diskcache) an entry is ``<namespace>|<envelope hash>`` -> a JSON object
``{"v", "executionId", "storedAt", "expiresAt", "response", "recordVersion",
"maxAge"}``: the record that holds the answer, the answer, and what the record's
change probe said when the entry was written (with the ``max_age`` its deadline
was reckoned with). In memory it is an :class:`Entry`: the answer ready to be
returned, and a probe that tells whether its record has changed since it was
verified. An entry whose record's probe still says what it noted is served as
it is (:func:`unchanged`), as the memory tier serves its answers; any other is
checked against its record (:func:`verify`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NamedTuple

import orjson
from pydantic import ValidationError

from .._util.jsonvalue import JSONObject, JSONValue, as_float
from .._util.time import parse_utc
from ..envelope import AgentResponse
from ..errors import IntentusNetError

if TYPE_CHECKING:
    from ..record.signing import KeyRing
    from ..store import ExecutionStore

#: The entry format this release writes and reads; others are misses.
ENTRY_VERSION: Final = 1
_log = logging.getLogger("intentusnet.cache")


class Entry:
    """An answer in the memory tier, ready to be served.

    Attributes:
        execution_id: the record that holds the answer.
        is_error: the answer is an error response.
        response: what every hit returns.
        probe: the store's change probe of the record.
        version: what the probe said when the record was verified.
        deadline: epoch seconds after which the answer is not served.
    """

    __slots__ = ("deadline", "execution_id", "is_error", "probe", "response", "version")

    def __init__(
        self,
        execution_id: str,
        response: AgentResponse,
        probe: Callable[[], object],
        version: object,
        deadline: float,
    ) -> None:
        self.execution_id = execution_id
        self.is_error = response.status == "error"
        # Every hit returns this one frozen response, as functools.lru_cache
        # returns one object: its payload is shared, and is to be read, not
        # changed (copying it would cost more than the rest of a hit).
        metadata = response.metadata
        if not (
            metadata.from_replay
            and metadata.execution_id == execution_id
            and metadata.original_execution_id == execution_id
            and metadata.recording_error is None
        ):  # not yet marked as served from its record
            metadata = metadata.model_copy(
                update={
                    "execution_id": execution_id,
                    "from_replay": True,
                    "original_execution_id": execution_id,
                    "recording_error": None,
                }
            )
            response = response.model_copy(update={"metadata": metadata})
        self.response = response
        self.probe = probe
        self.version = version
        self.deadline = deadline


def encode(
    execution_id: str,
    wire: JSONObject | None,
    deadline: float,
    version: object = None,
    max_age: float | None = None,
    *,
    now: float,
) -> tuple[bytes, float | None]:
    """An entry's disk value, and the seconds diskcache should keep it.

    ``version`` is what the record's change probe said when the answer was
    verified or recorded; ``max_age`` the policy's, which ``deadline`` counts;
    ``now`` the cache's clock (epoch seconds).
    """
    expires = None if math.isinf(deadline) else deadline
    value: JSONObject = {
        "v": ENTRY_VERSION,
        "executionId": execution_id,
        "storedAt": now,
        "expiresAt": expires,
        "response": wire,
    }
    noted = portable(version)
    if noted is not None:
        value["recordVersion"] = noted
        value["maxAge"] = max_age
    # diskcache drops the entry when it could no longer be served anyway.
    return orjson.dumps(value), None if expires is None else max(expires - now, 0.001)


class Stored(NamedTuple):
    """A disk value, read back."""

    execution_id: str
    expires: float | None
    #: the record's change probe when the entry was written (JSON), or None
    version: JSONValue
    max_age: float | None
    response: JSONValue


def decode(raw: bytes) -> Stored | None:
    """A disk value's parts; None if it is not one."""
    try:
        value = orjson.loads(raw)
        execution_id = value["executionId"]
        expires = value.get("expiresAt")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None
    if value.get("v") != ENTRY_VERSION or not isinstance(execution_id, str):
        return None
    return Stored(
        execution_id,
        as_float(expires),
        value.get("recordVersion"),
        as_float(value.get("maxAge")),
        value.get("response"),
    )


def portable(version: object) -> JSONValue:
    """A change probe's answer as JSON (as a disk value keeps it), or None."""
    if version is None:
        return None
    try:
        return orjson.loads(orjson.dumps(version))  # type: ignore[no-any-return]
    except (TypeError, orjson.JSONEncodeError):
        return None  # not JSON: the record is verified whenever it is read


def unchanged(
    store: ExecutionStore, stored: Stored, *, max_age: float | None, now: float
) -> Entry | None:
    """The entry as stored, if its record is the one it was written from.

    That is: the record's change probe says what the entry noted (the record
    was verified, or recorded by the cache, then, and has not changed since:
    no line appended, no byte edited, not deleted), the deadline was reckoned
    with this ``max_age``, and it has not passed by ``now`` (the cache's clock).
    Else None, and the record is to be verified (:func:`verify`).
    """
    if stored.version is None or stored.max_age != max_age:
        return None
    try:
        probe = store.change_probe(stored.execution_id)
        version = probe()
    except (IntentusNetError, OSError):
        return None
    if version is None or portable(version) != stored.version:
        return None
    if stored.expires is not None and now >= stored.expires:
        return None
    wire, execution_id = stored.response, stored.execution_id
    if not isinstance(wire, dict):
        return None
    metadata = wire.get("metadata")
    served = {  # marked as the entry serves it, so validated once, not copied
        **(metadata if isinstance(metadata, dict) else {}),
        "executionId": execution_id,
        "fromReplay": True,
        "originalExecutionId": execution_id,
        "recordingError": None,
    }
    try:
        response = AgentResponse.model_validate({**wire, "metadata": served})
    except (ValidationError, ValueError):
        return None
    deadline = math.inf if stored.expires is None else stored.expires
    return Entry(execution_id, response, probe, version, deadline)


def verify(
    store: ExecutionStore,
    execution_id: str,
    envelope_hash: str,
    *,
    expires: float | None,
    max_age: float | None,
    adopted: bool,
    ttl: float | None,
    now: float,
    keys: KeyRing | None = None,
) -> tuple[Entry, JSONObject] | None:
    """Load and verify the record of an answer; the entry, if it may be served.

    Never served: a record that is gone, damaged (its chain does not verify),
    whose signatures ``keys`` do not accept (logged: it may be forged),
    unfinished, invalidated, made from another envelope, or too old. A record
    ``adopted`` from the store rather than named by an entry must also not have
    been made with ``routing.cache == "no_store"``, and ``ttl`` counts from its
    creation, as ``max_age`` does; both are compared with ``now`` (the cache's
    clock, epoch seconds).

    Returns:
        The entry and the recorded response in wire form.
    """
    try:
        probe = store.change_probe(execution_id)
        version = probe()  # before loading: a change after it is noticed
        if version is None:
            return None
        record = store.load(execution_id)
    except (IntentusNetError, OSError):
        return None
    if keys is not None:
        check = keys.check(record)
        if not check.accepted:
            _log.warning(
                "cache: record %s not served: %s (%s)",
                execution_id,
                check.status.value,
                check.detail,
            )
            return None
    header = record.header
    wire = record.final_response
    if not header.replayable or header.envelope_hash != envelope_hash or not wire:
        return None
    if adopted and _directive(record.envelope) == "no_store":
        return None
    deadline = math.inf if expires is None else expires
    created = parse_utc(header.created_utc)
    if created is not None:
        for limit in (max_age, ttl if adopted else None):
            if limit is not None:
                deadline = min(deadline, created / 1e6 + limit)
    if now >= deadline:
        return None
    try:
        response = AgentResponse.model_validate(wire)
    except (ValidationError, ValueError):
        return None
    return Entry(execution_id, response, probe, version, deadline), wire


def _directive(envelope: JSONObject) -> object:
    routing = envelope.get("routing")
    return routing.get("cache") if isinstance(routing, dict) else None
