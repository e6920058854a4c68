"""The witness over HTTP: C2SP tlog-witness add-checkpoint (``intentusnet witness``).

One route, ``POST /add-checkpoint``; the request body is read up to a bound
(a checkpoint with 63 proof lines and a few signatures is a few KB) and
handed to :class:`~intentusnet.tlog.witness.Witness`, whose answer is sent as
it is. Starlette alone (the ``server`` extra).
"""

from __future__ import annotations

from typing import Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..tlog.witness import Witness

__all__ = ["create_witness_app"]

#: Larger request bodies are refused (413).
MAX_REQUEST: Final = 64 * 1024


def create_witness_app(witness: Witness) -> Starlette:
    """The HTTP app of ``witness``."""

    async def add_checkpoint(request: Request) -> Response:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REQUEST:
                return PlainTextResponse("request body too large\n", 413)
        answer = await run_in_threadpool(witness.add_checkpoint, body)
        # the content type exactly (no charset added): a 409's is the spec's
        headers = {"content-type": answer.content_type}
        return Response(answer.body, answer.status, headers=headers)

    return Starlette(
        routes=[Route("/add-checkpoint", add_checkpoint, methods=["POST"])]
    )
