"""``@cached``: a plain function's calls recorded, and answered again from records.

::

    @cached(store=FileExecutionStore(), intent="llm.complete")
    def complete(prompt: str, temperature: float = 0.0) -> dict[str, object]:
        return call_the_model(prompt, temperature)

Each call's arguments, bound to the signature with defaults applied, form the
envelope payload (``{"prompt": ..., "temperature": ...}``); the intent and the
tenant complete the envelope. A call whose envelope hash was answered before
returns the recorded result without calling the function. Otherwise the
function runs as the one agent of a small router, so the call is recorded like
any routed intent: ``intentusnet records list``, ``inspect`` and ``replay`` show
it, and the cache's policy, hit journal and counts apply.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar, cast

from .._util.jsonvalue import JSONObject, JSONValue, check_json
from ..envelope import AgentResponse
from ..errors import EnvelopeValidationError, NotCacheable
from ..store import ExecutionStore, open_store
from .callrouter import CallRouter, JobResult
from .replay_cache import CacheKey, CachePolicy, ReplayCache

__all__ = ["cached"]

_F = TypeVar("_F", bound=Callable[..., object])
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.:-]")
_ARGUMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def cached(
    *,
    intent: str,
    store: ExecutionStore | None = None,
    version: str = "1.0",
    tenant: str | None = None,
    cache: ReplayCache | None = None,
    namespace: str = "default",
    ttl: timedelta | float | None = None,
    policy: CachePolicy | None = None,
    record_hits: bool = True,
) -> Callable[[_F], _F]:
    """Record the decorated function's calls and answer repeats from the records.

    Works on plain and ``async`` functions. Arguments must be JSON values (dict,
    list, str, int, float, bool, None; tuples count as lists) and so must the
    result; exceptions the function raises reach the caller unchanged and are
    not cached.

    Args:
        intent: the intent name the calls are recorded under.
        store: where calls are recorded; by default the store ``cache``
            serves, else ``open_store()`` (``$INTENTUSNET_STORE``, a directory or
            a ``postgresql://`` URL, else ``.intentusnet/records``).
        version: the intent's version; change it to stop serving older answers.
        tenant: recorded and hashed with every call.
        cache: a ``ReplayCache`` to use; otherwise one is made from
            ``namespace``, ``ttl``, ``policy`` and ``record_hits``.
        namespace: see ``ReplayCache``.
        ttl: see ``ReplayCache``.
        policy: see ``ReplayCache``.
        record_hits: see ``ReplayCache``.

    Returns:
        A decorator; the function it returns has the same signature and a
        ``replay_cache`` attribute.

    Raises:
        NotCacheable: at call time, an argument or the result is not JSON; the
            message names the argument.
        CachedCallError: at call time, a cached failure was served (only with
            ``CachePolicy(serve_errors=True)``).

    Added in 0.1.0.
    """
    if cache is not None and (
        namespace != "default" or ttl is not None or policy is not None
    ):
        raise TypeError("give either cache= or namespace/ttl/policy, not both")
    if store is None:
        store = cache.store if cache is not None and cache.store else None
    the_store: ExecutionStore = store if store is not None else open_store()
    # Bound on the first call, not here: decorating (often at import time)
    # must not create directories.
    the_cache = cache or ReplayCache(
        namespace=namespace, ttl=ttl, policy=policy, record_hits=record_hits
    )

    def decorate(fn: _F) -> _F:
        signature = inspect.signature(fn)
        label = f"{fn.__module__}.{fn.__qualname__}"
        calls = CallRouter(
            the_store,
            intent=intent,
            version=version,
            agent=_NOT_NAME.sub("_", label)[:128],
            is_async=inspect.iscoroutinefunction(fn),
        )
        use_cache = the_cache.policy.allows(intent)

        def prepare(
            args: tuple[object, ...], kwargs: dict[str, object]
        ) -> tuple[JSONObject, CacheKey]:
            the_cache.bind(the_store)  # once; then an identity check
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            payload = cast(JSONObject, dict(bound.arguments))
            try:
                return payload, calls.key(payload, tenant=tenant)
            except EnvelopeValidationError as exc:
                found = _ARGUMENT.match(exc.path)
                name = found.group(0) if found else "?"
                raise NotCacheable(
                    f"@cached {label}: argument {name!r} is not cacheable: "
                    f"{exc}. Arguments must be JSON values (dict, list, str, "
                    "int, float, bool, None).",
                    name,
                ) from None

        def result(response: AgentResponse, *, ran: bool) -> JSONValue:
            if response.status == "success" and response.payload is not None:
                return response.payload.get("result")
            # The function's own exception where this call ran it (or waited on
            # the call that did); a failure served from a record is
            # CachedCallError, also in the process that saw it first.
            raise calls.failure(
                response, ran=ran, from_records=the_cache.policy.serve_errors
            )

        if inspect.iscoroutinefunction(fn):
            coroutine_fn = cast(Callable[..., Awaitable[object]], fn)

            @functools.wraps(fn)
            async def call_async(*args: object, **kwargs: object) -> JSONValue:
                payload, key = prepare(args, kwargs)

                async def job() -> JobResult:
                    return _wrap(label, await coroutine_fn(*args, **kwargs))

                ran = False

                def execute() -> Awaitable[AgentResponse]:
                    nonlocal ran
                    ran = True
                    return calls.arun(payload, job, tenant=tenant)

                answering = the_cache.aanswer(key, execute) if use_cache else execute()
                return result(await answering, ran=ran)

            wrapper: Callable[..., object] = call_async
        else:

            @functools.wraps(fn)
            def call(*args: object, **kwargs: object) -> JSONValue:
                payload, key = prepare(args, kwargs)

                def job() -> JobResult:
                    return _wrap(label, fn(*args, **kwargs))

                ran = False

                def execute() -> AgentResponse:
                    nonlocal ran
                    ran = True
                    return calls.run(payload, job, tenant=tenant)

                answer = the_cache.answer(key, execute) if use_cache else execute()
                return result(answer, ran=ran)

            wrapper = call
        wrapper.replay_cache = the_cache  # type: ignore[attr-defined]
        return cast(_F, wrapper)

    return decorate


def _wrap(label: str, value: object) -> JSONObject:
    try:
        check_json(value, "return value")
    except EnvelopeValidationError as exc:
        raise NotCacheable(
            f"@cached {label}: the return value is not cacheable: {exc}",
            "return value",
        ) from None
    return {"result": cast(JSONValue, value)}
