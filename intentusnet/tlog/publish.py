"""Publishing a checkpoint: cosigned by k of n witnesses, or not at all.

The log's side of C2SP tlog-witness (c2sp.org/tlog-witness). The log's newest
checkpoint is sent to each witness (``add-checkpoint``, all at once, each
within a bounded time), with a consistency proof from the size the log last
published; a witness answering 409 holds another size, and is asked once more
from that one. When ``quorum`` of them cosigned, the checkpoint and their
cosignature lines are published (``<log>/checkpoint.cosigned``); else nothing
is. ``intentusnet log publish`` does it once; a store's sequencer does it
after each batch it appends.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple

from ..errors import LogError, LogIntegrityError
from ..record.keys import PublicKey
from .audit import log_origin, open_known
from .cosignature import Cosigner, parse_cosigner
from .log import TileLog
from .witness import request_cosignature

if TYPE_CHECKING:
    import httpx

__all__ = [
    "WITNESSES_ENV",
    "WITNESS_QUORUM_ENV",
    "LogWitnesses",
    "Published",
    "publish_checkpoint",
    "witnesses_from_env",
]

#: ``URL=VKEY`` entries, separated by white space: a store's witnesses.
WITNESSES_ENV: Final = "INTENTUSNET_LOG_WITNESSES"
#: How many of them must cosign (default: all).
WITNESS_QUORUM_ENV: Final = "INTENTUSNET_LOG_WITNESS_QUORUM"


class LogWitnesses(NamedTuple):
    """The witnesses a log's checkpoints go to, and how many must cosign.

    A checkpoint is published (``checkpoint.cosigned``) only when ``quorum``
    of ``witnesses`` cosigned it. Each witness is asked within ``timeout``
    seconds (twice at most: once more after a 409). Added in 0.1.0.

    Attributes:
        witnesses: each witness's ``add-checkpoint`` URL prefix and key.
        quorum: how many must cosign (1 to ``len(witnesses)``).
        timeout: seconds each request may take.
    """

    witnesses: tuple[tuple[str, Cosigner], ...]
    quorum: int
    timeout: float = 5.0

    @classmethod
    def parse(
        cls, entries: Sequence[str], quorum: int | None = None, timeout: float = 5.0
    ) -> LogWitnesses:
        """The witnesses of ``URL=VKEY`` entries (VKEY as ``intentusnet witness`` says).

        Raises:
            LogIntegrityError: an entry without a URL or with a bad key, no
                entry, or a quorum not in 1 .. the number of entries.
        """
        found = []
        for entry in entries:
            url, equals, vkey = entry.rpartition("=")
            if not equals or "+" not in vkey or not url:
                raise LogIntegrityError(f"a witness is URL=VKEY, not {entry[:80]!r}")
            try:
                found.append((url, parse_cosigner(vkey)))
            except LogIntegrityError as exc:
                raise LogIntegrityError(f"witness {entry[:80]!r}: {exc}") from None
        need = len(found) if quorum is None else quorum
        if not found or not 1 <= need <= len(found):
            raise LogIntegrityError(
                f"a witness quorum of {need} needs 1 to {len(found)} witnesses"
            )
        if not timeout > 0:
            raise LogIntegrityError(f"a witness timeout of {timeout} s")
        return cls(tuple(found), need, timeout)


def witnesses_from_env(env: Mapping[str, str] = os.environ) -> LogWitnesses | None:
    """The witnesses ``INTENTUSNET_LOG_WITNESSES`` names, or None when unset.

    Raises:
        LogIntegrityError: a malformed entry or quorum.
    """
    entries = env.get(WITNESSES_ENV, "").split()
    if not entries:
        return None
    quorum = env.get(WITNESS_QUORUM_ENV, "").strip()
    if quorum and not quorum.isdigit():
        raise LogIntegrityError(f"{WITNESS_QUORUM_ENV}={quorum!r} is not a number")
    return LogWitnesses.parse(entries, int(quorum) if quorum else None)


class Published(NamedTuple):
    """What publishing a checkpoint came to. Added in 0.1.0.

    Attributes:
        origin: the log.
        size: the checkpoint's size.
        cosigned: how many witnesses cosigned it.
        published: whether it was published (a quorum cosigned).
        problems: why each other witness did not, ``URL: reason``.
    """

    origin: str
    size: int
    cosigned: int
    published: bool
    problems: list[str]


def publish_checkpoint(
    log: TileLog, key: PublicKey, witnesses: LogWitnesses
) -> Published:
    """Have ``witnesses`` cosign the log's newest checkpoint; publish it if enough did.

    Raises:
        LogError: the log has no checkpoint yet, or the cosigned one cannot
            be written.
        LogIntegrityError: the log's checkpoint, or the one it last
            published, is not signed by ``key``.
    """
    import httpx  # here: a store without witnesses never loads it

    origin = log_origin(key.key_id)
    note = log.checkpoint_note()
    if note is None:
        raise LogError(f"the log in {log.path} has no checkpoint yet")
    head = open_known(note, origin, key, "the log's checkpoint")
    published = log.cosigned_note()
    start = 0
    if published is not None:
        start = open_known(published, origin, key, "the published checkpoint").size
    answers: list[tuple[str | None, str]] = [(None, "not asked")] * len(
        witnesses.witnesses
    )
    with httpx.Client(timeout=witnesses.timeout, trust_env=False) as http:

        def ask(at: int, url: str, cosigner: Cosigner) -> None:
            answers[at] = request_cosignature(
                _poster(http, url), cosigner, log, note, head.size, start
            )

        # all at once: n witnesses cost one (bounded) round, not n
        threads = [
            threading.Thread(target=ask, args=(at, url, cosigner), daemon=True)
            for at, (url, cosigner) in enumerate(witnesses.witnesses)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    lines = [line for line, _ in answers if line is not None]
    problems = [
        f"{url}: {problem}"
        for (url, _), (line, problem) in zip(witnesses.witnesses, answers, strict=True)
        if line is None
    ]
    done = len(lines) >= witnesses.quorum
    if done:
        log.publish_cosigned(note + "".join(lines).encode(), head.size)
    return Published(origin, head.size, len(lines), done, problems)


def _poster(http: httpx.Client, url: str) -> Callable[[bytes], tuple[int, str]]:
    import httpx

    def post(body: bytes) -> tuple[int, str]:
        try:
            answer = http.post(url.rstrip("/") + "/add-checkpoint", content=body)
        except httpx.HTTPError as exc:
            raise LogError(f"cannot reach it: {exc}") from None
        return answer.status_code, answer.text

    return post
