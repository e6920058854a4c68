"""The cache-hit journal: one sealed line per answer served from the cache.

A hit is not an execution, so it gets no record file of its own: a popular
cached answer would otherwise cost one file per request. Instead each hit is
one ``CACHE_HIT`` line appended to a journal of the day (UTC) it happened::

    <root>/cache-hits/2026-11-22.jsonl

Every line carries the SHA-256 of its own bytes as its last field, so an edited
line is found and left out when the journal is read. This module is the line
format every store shares; ``file/hits.py`` keeps the file store's day files and
``postgres/hits.py`` PostgreSQL's rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from hashlib import sha256
from typing import Final, NamedTuple

import orjson

from .._util.ids import uuid7_hex
from .._util.jsonvalue import JSONObject
from .._util.time import parse_utc, utc_now
from . import logger

__all__ = ["HITS_DIR", "CacheHit", "Hit", "hit_line", "parse_hits", "select"]

#: The journal directory under a store's root.
HITS_DIR: Final = "cache-hits"
#: The journal line format this release writes and reads.
HITS_VERSION: Final = 1
_HASH_TAG: Final = b',"hash":"sha256:'
_TAIL: Final = len(_HASH_TAG) + 64 + 2


class Hit(NamedTuple):
    """An answer served from the replay cache, to be journaled (``record_cache_hit``).

    Attributes:
        source_execution_id: the record whose answer was served.
        envelope_hash: the hash of the envelope answered.
        intent_name: the intent answered.
        intent_version: its version.
        request_id: the caller's request id, when there was one.
        namespace: the cache namespace that served it.

    Added in 0.1.0.
    """

    source_execution_id: str
    envelope_hash: str
    intent_name: str
    intent_version: str = "1.0"
    request_id: str | None = None
    namespace: str = "default"


@dataclass(frozen=True, slots=True)
class CacheHit:
    """One answer served from the replay cache instead of running agents.

    Attributes:
        hit_id: ``hit-`` + a time-sortable UUIDv7 in hex.
        created_utc: when the hit was served (ISO 8601, UTC, ``Z``).
        source_execution_id: the record whose answer was served.
        envelope_hash: the hash of the envelope answered.
        intent_name: the intent answered.
        intent_version: its version.
        request_id: the caller's request id, when there was one.
        namespace: the cache namespace that served it.

    Added in 0.1.0.
    """

    hit_id: str
    created_utc: str
    source_execution_id: str
    envelope_hash: str
    intent_name: str
    intent_version: str
    request_id: str | None
    namespace: str

    def to_json(self) -> JSONObject:
        """Return the camelCase form ``records list --json`` prints."""
        return {
            "kind": "cache_hit",
            "hitId": self.hit_id,
            "createdUtc": self.created_utc,
            "intent": {"name": self.intent_name, "version": self.intent_version},
            "envelopeHash": self.envelope_hash,
            "status": "cache_hit",
            "sourceExecutionId": self.source_execution_id,
            "requestId": self.request_id,
            "namespace": self.namespace,
        }


def hit_line(hit: Hit) -> tuple[bytes, str, str]:
    """Seal one journal line for ``hit``, happening now.

    Returns:
        The line (newline included), the hit id and the UTC time text.
    """
    hit_id = "hit-" + uuid7_hex()
    created, _micros = utc_now()
    body = orjson.dumps(
        {
            "v": HITS_VERSION,
            "type": "CACHE_HIT",
            "hitId": hit_id,
            "createdUtc": created,
            "sourceExecutionId": hit.source_execution_id,
            "envelopeHash": hit.envelope_hash,
            "intent": {"name": hit.intent_name, "version": hit.intent_version},
            "requestId": hit.request_id,
            "namespace": hit.namespace,
        }
    )[:-1]
    digest = sha256(body).hexdigest().encode()
    return body + _HASH_TAG + digest + b'"}\n', hit_id, created


def parse_hits(data: bytes, where: str = "journal") -> Iterator[CacheHit]:
    """Yield the sound hits of a journal's bytes; damaged lines are logged, skipped.

    A torn last line (a crash mid-write) is skipped silently.
    """
    lines = data.split(b"\n")
    lines.pop()  # b"" after the last newline, or a torn line
    for number, line in enumerate(lines, 1):
        hit = _parse_line(line)
        if hit is None:
            logger.warning("%s line %d is damaged or edited; left out", where, number)
        else:
            yield hit


def _parse_line(line: bytes) -> CacheHit | None:
    if (
        len(line) <= _TAIL
        or line[-_TAIL:-66] != _HASH_TAG
        or line[-2:] != b'"}'
        or sha256(line[:-_TAIL]).hexdigest().encode() != line[-66:-2]
    ):
        return None
    try:
        fields = orjson.loads(line)
        intent = fields["intent"]
        request_id = fields.get("requestId")
        return CacheHit(
            hit_id=str(fields["hitId"]),
            created_utc=str(fields["createdUtc"]),
            source_execution_id=str(fields["sourceExecutionId"]),
            envelope_hash=str(fields["envelopeHash"]),
            intent_name=str(intent["name"]),
            intent_version=str(intent["version"]),
            request_id=None if request_id is None else str(request_id),
            namespace=str(fields.get("namespace", "default")),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


def select(
    hits: Iterator[CacheHit] | list[CacheHit],
    *,
    intent: str | None,
    since_us: int | None,
) -> list[CacheHit]:
    """The hits matching the filters, newest first."""
    found = [
        hit
        for hit in hits
        if (intent is None or hit.intent_name == intent)
        and (since_us is None or (parse_utc(hit.created_utc) or 0) >= since_us)
    ]
    found.sort(key=lambda hit: (hit.created_utc, hit.hit_id), reverse=True)
    return found
