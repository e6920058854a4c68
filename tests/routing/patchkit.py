"""An application for the versioned-code tests: one agent, four versions of it.

Run as a script (``python tests/routing/patchkit.py route``) it routes one
``job`` and prints the response; ``PATCH_KILL=POINT`` makes the process SIGKILL
itself there: ``in:NAME`` inside step NAME (its ``STEP_START`` is on disk, its
end is not), ``after:NAME`` once step NAME has ended. ``PATCH_VERSION`` (read
at every call) is the code deployed:

- ``1``: steps ``A``, ``B``;
- ``2``: ``A``, then ``C`` behind ``ctx.patched("c")``, else ``B``;
- ``3``: ``A``, ``ctx.deprecate_patch("c")``, ``C`` (the patch retired);
- ``4``: ``A``, ``C`` (the change not behind a patch).

Every step function appends ``run:NAME`` to ``PATCH_LOG`` first, so the tests
count what really ran. ``PATCH_STORE`` is a directory or a ``postgresql://``
URL (``open_store``).
"""

from __future__ import annotations

import os
import signal
import sys

import orjson

from intentusnet import IntentRouter, open_store

JOB = {"intent": {"name": "job"}, "payload": {"n": 1}}

router = IntentRouter(store=open_store(os.environ.get("PATCH_STORE", ".")))


def _point(name: str) -> None:
    if os.environ.get("PATCH_KILL") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _run(ctx, name: str) -> str:  # type: ignore[no-untyped-def]
    def call() -> str:
        with open(os.environ["PATCH_LOG"], "a", encoding="utf-8") as handle:
            handle.write(f"run:{name}\n")
        _point(f"in:{name}")
        return name

    done: str = ctx.step(name, {}, call)
    _point(f"after:{name}")
    return done


@router.agent("job")
def job(envelope, ctx):  # type: ignore[no-untyped-def]
    """Run the steps of the version deployed (``PATCH_VERSION``)."""
    version = os.environ.get("PATCH_VERSION", "1")
    taken = [_run(ctx, "A")]
    if version == "1":
        taken.append(_run(ctx, "B"))
    elif version == "2":
        taken.append(_run(ctx, "C" if ctx.patched("c") else "B"))
    elif version == "3":
        ctx.deprecate_patch("c")
        taken.append(_run(ctx, "C"))
    else:
        taken.append(_run(ctx, "C"))
    return {"steps": taken}


def main(argv: list[str]) -> int:
    """``route``: route one job and print the response."""
    assert argv == ["route"], argv
    response = router.route_intent(JOB)
    sys.stdout.write(orjson.dumps(response.to_wire()).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
