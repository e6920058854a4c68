"""A queued application, run by several processes at once, writing a ledger.

Run as ``python queuekit.py route STORE LEDGER COUNT THREADS TENANT``, it routes
``COUNT`` executions of the ``work`` intent (on queue ``llm``) from
``THREADS`` threads, as tenant ``TENANT`` (``-``: none), then prints the
error codes of their answers, one a line (``ok`` for a success). The queue's
limits come from the environment: ``QUEUE_CONCURRENCY``, ``QUEUE_PER_TENANT``,
``QUEUE_RATE`` (unset: no such limit). ``QUEUE_TIMEOUT_MS`` is each
envelope's ``timeoutMs``.

The agent appends ``start TENANT ID TIME`` to the ledger when it begins and
``end TENANT ID TIME`` when it ends (``O_APPEND``: the lines of every process
land in the order they were written), so the test counts how many ran at once
by reading the ledger in order, never by timing. To make the limit reachable
it holds until the ledger shows ``QUEUE_FILL`` running (or every execution
the test expects, ``QUEUE_TOTAL``, has started; at most 0.5 s: the last ones
of a full tenant cannot fill the queue), or for
``QUEUE_HOLD_MS``; with ``QUEUE_STALL`` it touches ``LEDGER.stalled`` and
sleeps until killed.

``python queuekit.py submit STORE LEDGER COUNT`` submits ``COUNT`` executions
asynchronously (as ``Prefer: respond-async`` does: each is queued) and prints
their ids, one a line; with ``QUEUE_STALL`` it then sleeps, starting queued
executions (which stall), until killed. ``python queuekit.py work
STORE LEDGER SECONDS`` only starts queued executions, until the ledger holds
``QUEUE_ENDS`` ends or ``SECONDS`` pass.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from intentusnet import IntentRouter, open_store
from intentusnet.routing.queued import ExecutionQueued
from intentusnet.routing.seams import ExecutionOptions


def _limit(name: str) -> int | None:
    value = os.environ.get(name)
    return None if value is None else int(value)


def spawn(mode: str, *args: object, **env: object) -> subprocess.Popen[str]:
    """This file run as ``mode`` with ``args``, ``env`` upper-cased in its environment.

    Its stdout is a pipe; the package it imports is the one this process has.
    """
    environment = {**os.environ, **{k.upper(): str(v) for k, v in env.items()}}
    package = str(Path(__file__).resolve().parents[2])
    environment["PYTHONPATH"] = os.pathsep.join(
        [package, environment.get("PYTHONPATH", "")]
    )
    command = [sys.executable, __file__, mode, *map(str, args)]
    return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, text=True)


def write(ledger: str, line: str) -> None:
    """Append one line to the ledger."""
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{line} {time.time()!r}\n".encode())
    finally:
        os.close(fd)


def running(ledger: str) -> tuple[int, int]:
    """(running now, started so far) as the ledger says."""
    text = Path(ledger).read_text()
    starts = text.count("start ")
    return starts - text.count("end "), starts


def build(where: str, ledger: str) -> IntentRouter:
    """The application's router on the store at ``where``."""
    router = IntentRouter(store=open_store(where))
    router.queue(
        "llm",
        concurrency=_limit("QUEUE_CONCURRENCY"),
        per_tenant=_limit("QUEUE_PER_TENANT"),
        rate=os.environ.get("QUEUE_RATE"),
    )
    fill, total = _limit("QUEUE_FILL"), _limit("QUEUE_TOTAL") or 0
    hold = (_limit("QUEUE_HOLD_MS") or 0) / 1000

    @router.agent("work", queue="llm")
    def work(envelope, ctx):  # type: ignore[no-untyped-def]
        tenant = envelope.context.tenant or "-"
        write(ledger, f"start {tenant} {ctx.execution_id}")
        if os.environ.get("QUEUE_STALL"):
            Path(ledger + ".stalled").touch()
            time.sleep(60)
        deadline = time.monotonic() + 0.5
        while fill is not None and time.monotonic() < deadline:
            now, started = running(ledger)
            if now >= fill or started >= total:
                break
            time.sleep(0.005)
        time.sleep(hold)
        write(ledger, f"end {tenant} {ctx.execution_id}")
        return {"ok": True}

    return router


def main(where: str, ledger: str, count: int, threads: int, tenant: str) -> None:
    """Route ``count`` executions from ``threads`` threads; print their codes."""
    router = build(where, ledger)
    timeout = _limit("QUEUE_TIMEOUT_MS")
    codes: list[str] = []
    numbers = iter(range(count))
    lock = threading.Lock()

    def loop() -> None:
        while True:
            with lock:
                n = next(numbers, None)
            if n is None:
                return
            answer = router.route_intent(
                {
                    "intent": {"name": "work"},
                    "payload": {"n": n},
                    "context": {"tenant": None if tenant == "-" else tenant},
                    "routing": {"timeoutMs": timeout},
                }
            )
            with lock:
                codes.append("ok" if answer.error is None else answer.error.code.value)

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    router.close()
    print("\n".join(codes), flush=True)


def submit(where: str, ledger: str, count: int) -> None:
    """Submit ``count`` executions asynchronously; print their ids."""
    router = build(where, ledger)
    for n in range(count):
        opened: list[str] = []
        envelope = {"intent": {"name": "work"}, "payload": {"n": n}}
        with contextlib.suppress(ExecutionQueued):  # queued: started elsewhere
            router.route_intent(
                envelope, options=ExecutionOptions(opened=opened.append)
            )
        print(opened[0], flush=True)
    if os.environ.get("QUEUE_STALL"):
        time.sleep(60)
    router.close()


def work(where: str, ledger: str, seconds: float) -> None:
    """Start queued executions until none is left or ``seconds`` pass."""
    router = build(where, ledger)
    ends = _limit("QUEUE_ENDS") or 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if Path(ledger).exists() and Path(ledger).read_text().count("end ") >= ends:
            break
        time.sleep(0.05)
    router.close()


if __name__ == "__main__":
    mode, where, ledger = sys.argv[1:4]
    if mode == "route":
        main(where, ledger, int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif mode == "submit":
        submit(where, ledger, int(sys.argv[4]))
    else:
        work(where, ledger, float(sys.argv[4]))
