"""Redaction: secrets replaced by keyed markers before anything is recorded.

A :class:`Redactor` holds a key and rules saying where secrets sit (paths into
the envelope payload, step arguments and outputs, agent answers, HTTP bodies
and headers; the path syntax is in :mod:`intentusnet._util.paths`), and an
optional hook. A value a rule or the hook picks is replaced by its marker,
``[redacted:hmac-sha256:<32 hex>]``: the first 128 bits of the HMAC-SHA256,
under the key, of the value's canonical JSON. Equal values give equal markers,
so equal secrets still hash equal and the cache still hits; the marker cannot
be turned back into the value without the key.

Each kind of data is redacted at one point, before it is hashed or sealed:

- the envelope: by the router, before its hash is taken (``router.py``);
- step arguments and outputs: by the step session, before their hashes
  (``execution.py``);
- agent answers, the final response and the text of every event (error
  messages, tracebacks): by the recorder (``recorder.py``);
- HTTP requests and responses: by the httpx transports.

A :class:`Redaction` is one execution's side of it: the redactor, and the
secrets seen so far in the execution (the values its rules replaced, and those
the transports name). Wherever such a secret appears inside a longer string
recorded later, e.g. an exception message, it is replaced by its marker too.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Final, TypeAlias

from .._util.jsonvalue import JSONObject, JSONValue
from .._util.paths import DEEP, Path, parse, rewrite
from ..envelope import AgentResponse, IntentEnvelope, RoutingStrategy
from ..hashing import canonical_json

if TYPE_CHECKING:
    from ..envelope import ErrorInfo

__all__ = [
    "MARKER_PREFIX",
    "MIN_KEY_BYTES",
    "MIN_SECRET_CHARS",
    "RedactHook",
    "Redaction",
    "Redactor",
    "header_names",
    "is_marker",
    "keyed",
    "redact_body",
]

#: Every marker starts so; 32 hex digits and ``]`` follow.
MARKER_PREFIX: Final = "[redacted:hmac-sha256:"
_MARKER_RE: Final = r"\[redacted:hmac-sha256:[0-9a-f]{32}\]"
_MARKER: Final = re.compile(_MARKER_RE)
_MARKER_LEN: Final = len(MARKER_PREFIX) + 33
#: Shorter keys are refused: an HMAC is only as strong as its key.
MIN_KEY_BYTES: Final = 16
#: Shorter secrets are not searched for inside other strings (a 2-digit value
#: would turn every number in a traceback into a marker).
MIN_SECRET_CHARS: Final = 4

#: ``hook(where, path, value) -> bool``: True redacts ``value``. ``where`` is
#: ``payload``, ``response``, ``args:<step>``, ``output:<step>``,
#: ``http.request`` or ``http.response``; ``path`` is like ``user.ssn``, ``$``
#: for the root.
RedactHook: TypeAlias = Callable[[str, str, JSONValue], bool]
_Table: TypeAlias = dict[str, tuple[Path, ...]]


def is_marker(value: object) -> bool:
    """Whether ``value`` is a marker (markers are never redacted again)."""
    return (
        type(value) is str
        and len(value) == _MARKER_LEN
        and _MARKER.fullmatch(value) is not None
    )


class Redactor:
    """Replaces secrets by keyed markers in everything recorded. Added in 0.1.0.

    Give it to ``IntentRouter(..., redactor=...)`` and to
    ``RecordingTransport(..., redactor=...)``; see docs/redaction.md.

    Args:
        key: the HMAC key (at least 16 bytes; a ``str`` counts its UTF-8
            bytes). Keep it secret and stable: another key gives other
            markers, so earlier records no longer answer equal requests.
        payload: paths into the envelope payload, e.g. ``user.ssn``,
            ``messages[*].content``, ``**.password``.
        args: paths into step arguments: a list for every step, or a mapping
            from step name (``"*"``: every step) to a list.
        outputs: paths into step outputs, given like ``args`` (``$`` is the
            whole output).
        responses: paths into the payload an agent answers with.
        http_body: for the httpx transports, paths into JSON request and
            response bodies.
        http_headers: for the httpx transports, header names whose values are
            recorded as markers (a named credential header is then hashed as
            its marker too).
        hook: ``hook(where, path, value) -> bool``, called for every node of
            every value the rules apply to; True redacts the node.

    Raises:
        ValueError: a key shorter than 16 bytes, a bad path or header name.
        TypeError: a key that is not bytes or str, a single string where a
            list of paths belongs, or a hook that is not callable.
    """

    __slots__ = (
        "_args",
        "_headers",
        "_hook",
        "_http_body",
        "_key",
        "_outputs",
        "_payload",
        "_responses",
    )

    def __init__(
        self,
        key: bytes | str,
        *,
        payload: Collection[str] = (),
        args: Collection[str] | Mapping[str, Collection[str]] = (),
        outputs: Collection[str] | Mapping[str, Collection[str]] = (),
        responses: Collection[str] = (),
        http_body: Collection[str] = (),
        http_headers: Collection[str] = (),
        hook: RedactHook | None = None,
    ) -> None:
        self._key = _check_key(key)
        self._payload = _paths(payload, "payload", whole=False)
        self._args = _table(args, "args")
        self._outputs = _table(outputs, "outputs")
        self._responses = _paths(responses, "responses", whole=False)
        self._http_body = _paths(http_body, "http_body")
        self._headers = _header_names(http_headers)
        if hook is not None and not callable(hook):
            raise TypeError(f"hook must be callable, not {type(hook).__name__}")
        self._hook = hook

    def __repr__(self) -> str:  # never the key
        rules = sum(
            len(r) for r in (self._payload, self._responses, self._http_body)
        ) + sum(len(r) for t in (self._args, self._outputs) for r in t.values())
        return (
            f"Redactor({rules} rules, {len(self._headers)} headers, "
            f"hook={self._hook is not None})"
        )

    def marker(self, value: JSONValue) -> str:
        """The marker of ``value``: ``[redacted:hmac-sha256:<32 hex>]``.

        Raises:
            EnvelopeValidationError: ``value`` is not JSON.
        """
        digest = hmac.new(self._key, canonical_json(value), hashlib.sha256)
        return f"{MARKER_PREFIX}{digest.hexdigest()[:32]}]"

    def redact_envelope(self, envelope: IntentEnvelope) -> IntentEnvelope:
        """The envelope as the router records and hashes it.

        To check an envelope against a record (``ReplayEngine.replay(env=...)``,
        ``compute_hash``), redact it first. Returns ``envelope`` itself when
        nothing in it is redacted.
        """
        return Redaction(self).envelope(envelope)


# -- for the parts that apply a redactor (the router's and the transports') -------


def keyed(redactor: Redactor | None) -> Redactor:
    """A redactor with the same key (a random one for None) and no rules.

    What a transport gives its own router: its markers match the user's, and
    it redacts only the secrets the transport names.
    """
    return Redactor(redactor._key if redactor else secrets.token_bytes(32))


def header_names(redactor: Redactor) -> frozenset[str]:
    """The header names (lower case) whose values ``redactor`` records as markers."""
    return redactor._headers


def redact_body(
    redactor: Redactor, body: JSONValue, where: str, found: dict[str, str]
) -> JSONValue:
    """A JSON body with the ``http_body`` rules and the hook applied."""
    return _rewrite(redactor, body, redactor._http_body, where, found)


def texts_of(redactor: Redactor, values: Iterable[str]) -> dict[str, str]:
    """Secrets named as strings, each with its marker (short ones left out)."""
    return {
        text: redactor.marker(text)
        for text in values
        if len(text) >= MIN_SECRET_CHARS and not is_marker(text)
    }


class Redaction:
    """One execution's redaction: the rules, and the secrets seen so far.

    Args:
        redactor: the rules and the key.
        parent: a child intent's parent: the child starts knowing its
            parent's secrets, and the parent learns the child's.
    """

    __slots__ = ("_known", "_lock", "_parent", "_scrubber", "redactor")

    def __init__(self, redactor: Redactor, parent: Redaction | None = None) -> None:
        self.redactor = redactor
        self._parent = parent
        self._lock = threading.Lock()
        self._known: dict[str, str] = {} if parent is None else dict(parent._known)
        #: the known secrets and the pattern finding them, made when first needed
        self._scrubber: tuple[dict[str, str], re.Pattern[str]] | None = None

    def add(self, found: Mapping[str, str]) -> None:
        """Remember secrets (text -> marker), to replace them in later text."""
        fresh = {k: v for k, v in found.items() if k not in self._known}
        if fresh:
            with self._lock:
                self._known = {**self._known, **fresh}
                self._scrubber = None
            if self._parent is not None:
                self._parent.add(fresh)

    def add_texts(self, values: Iterable[str]) -> None:
        """Remember secrets given as strings (a transport's keys, for instance)."""
        self.add(texts_of(self.redactor, values))

    # -- the kinds of data --------------------------------------------------------

    def envelope(self, env: IntentEnvelope) -> IntentEnvelope:
        """The envelope with its payload redacted (``env`` when nothing is)."""
        payload = self._apply(
            env.payload, self.redactor._payload, "payload", whole=False
        )
        if payload is env.payload:
            return env
        # Not validated again: the payload was, and redaction only puts marker
        # strings in place of its values.
        fields = {name: getattr(env, name) for name in type(env).model_fields}
        return type(env).model_construct(**{**fields, "payload": payload})

    def args(self, step: str, value: JSONValue) -> JSONValue:
        """A step's arguments, before they are hashed."""
        rules = _for_step(self.redactor._args, step)
        return self._apply(value, rules, "args:" + step)

    def output(self, step: str, value: JSONValue) -> JSONValue:
        """A step's output, before it is hashed."""
        rules = _for_step(self.redactor._outputs, step)
        return self._apply(value, rules, "output:" + step)

    def answer(self, payload: JSONObject) -> JSONObject:
        """The payload an agent answered with."""
        done = self._apply(payload, self.redactor._responses, "response", whole=False)
        return _object(done)

    def response(self, response: AgentResponse) -> AgentResponse:
        """The response as recorded (and cached): answers and error texts redacted."""
        payload = response.payload
        new_payload = payload
        if payload is not None:
            if response.metadata.strategy is RoutingStrategy.BROADCAST:
                each = {  # one answer per agent
                    name: self.answer(item)
                    if isinstance(item, dict)
                    else self.scrub(item)
                    for name, item in payload.items()
                }
                if any(each[name] is not payload[name] for name in payload):
                    new_payload = each
            else:
                new_payload = self.answer(payload)
        error = response.error
        new_error = None if error is None else self._error(error)
        if new_payload is payload and new_error is error:
            return response
        return response.model_copy(update={"payload": new_payload, "error": new_error})

    def event(self, event_type: str, data: JSONObject) -> JSONObject:
        """An event's data as sealed: answers redacted, known secrets replaced.

        Step arguments and outputs were redacted before they were hashed; the
        rest of a step's data (its error, its traceback) is scrubbed here.
        """
        if event_type == "AGENT_ATTEMPT_END":
            output = data.get("output")
            if isinstance(output, dict):
                answered = self.answer(output)
                if answered is not output:
                    data = {**data, "output": answered}
        if not self._known:
            return data
        if event_type in ("STEP_START", "STEP_END"):
            # args and output were redacted before they were hashed
            rest = {k: v for k, v in data.items() if k != "args" and k != "output"}
            scrubbed = self.scrub(rest)
            return data if scrubbed is rest else {**data, **_object(scrubbed)}
        return _object(self.scrub(data))

    def scrub(self, value: JSONValue) -> JSONValue:
        """``value`` with every known secret inside its strings replaced."""
        scrubber = self._scrubber
        if scrubber is None:
            if not self._known:
                return value
            with self._lock:
                known = self._known
                alternatives = "|".join(
                    re.escape(text) for text in sorted(known, key=len, reverse=True)
                )
                # Markers first: a secret is never found inside a marker.
                pattern = re.compile(f"{_MARKER_RE}|{alternatives}")
                scrubber = self._scrubber = (known, pattern)
        known, pattern = scrubber

        def swap(match: re.Match[str]) -> str:
            found = match.group()
            return known.get(found, found)

        return _scrub(value, pattern, swap)

    # -- internals ------------------------------------------------------------------

    def _apply(
        self,
        value: JSONValue,
        rules: tuple[Path, ...],
        where: str,
        *,
        whole: bool = True,
    ) -> JSONValue:
        found: dict[str, str] = {}
        done = _rewrite(self.redactor, value, rules, where, found, whole=whole)
        self.add(found)
        return self.scrub(done)

    def _error(self, error: ErrorInfo) -> ErrorInfo:
        message = self.scrub(error.message)
        details = self.scrub(error.details)
        if message is error.message and details is error.details:
            return error
        return error.model_copy(update={"message": message, "details": details})


# -- walking JSON --------------------------------------------------------------------


def _rewrite(
    redactor: Redactor,
    value: JSONValue,
    rules: tuple[Path, ...],
    where: str,
    found: dict[str, str],
    *,
    whole: bool = True,
) -> JSONValue:
    """``value`` with every node the rules or the hook pick replaced by its marker.

    An untouched value is returned as it is. ``found`` receives each replaced
    string (and integer, as text) with its marker. Without ``whole`` the root
    itself is never replaced (a payload stays an object).
    """
    hook = redactor._hook
    if not rules and hook is None:
        return value

    def replace(node: JSONValue) -> JSONValue:
        if is_marker(node):
            return node  # already redacted: a record redacts to itself
        marker = redactor.marker(node)
        if type(node) is str:  # the common case: its marker is the one in text
            if len(node) >= MIN_SECRET_CHARS:
                found[node] = marker
        else:
            _collect(redactor, node, found)
        return marker

    pick = None if hook is None else functools.partial(hook, where)
    return rewrite(value, rules, replace, pick, whole=whole)


def _collect(redactor: Redactor, value: JSONValue, found: dict[str, str]) -> None:
    """Note the strings (and integers, as text) inside a redacted value."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            text = item
        elif type(item) is int:
            text = str(item)
        elif type(item) is dict:
            stack.extend(item.values())
            continue
        elif type(item) is list:
            stack.extend(item)
            continue
        else:
            continue
        if len(text) >= MIN_SECRET_CHARS and text not in found and not is_marker(text):
            found[text] = redactor.marker(text)


def _scrub(
    value: JSONValue, pattern: re.Pattern[str], swap: Callable[[re.Match[str]], str]
) -> JSONValue:
    if type(value) is str:
        return pattern.sub(swap, value) if pattern.search(value) else value
    if type(value) is dict:
        changed = False
        scrubbed: dict[str, JSONValue] = {}
        for key, item in value.items():
            new_key = pattern.sub(swap, key)
            new = _scrub(item, pattern, swap)
            changed = changed or new is not item or new_key != key
            scrubbed[new_key] = new
        return scrubbed if changed else value
    if type(value) is list:
        items: list[JSONValue] | None = None
        for index, item in enumerate(value):
            new = _scrub(item, pattern, swap)
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    return value


def _object(value: JSONValue) -> JSONObject:
    assert isinstance(value, dict)  # scrubbing keeps a value's type
    return value


# -- checking the arguments ------------------------------------------------------------


def _check_key(key: object) -> bytes:
    if isinstance(key, str):
        raw = key.encode("utf-8")
    elif isinstance(key, bytes | bytearray):
        raw = bytes(key)
    else:
        raise TypeError(f"a Redactor key is bytes or str, not {type(key).__name__}")
    if len(raw) < MIN_KEY_BYTES:
        raise ValueError(
            f"a Redactor key needs at least {MIN_KEY_BYTES} bytes, got {len(raw)}; "
            "make one with secrets.token_bytes(32) and keep it secret"
        )
    return raw


def _paths(rules: object, name: str, *, whole: bool = True) -> tuple[Path, ...]:
    if isinstance(rules, str | bytes) or not isinstance(rules, Collection):
        raise TypeError(
            f"{name} takes a list of paths, not {type(rules).__name__}"
            + (f": write [{rules!r}]" if isinstance(rules, str) else "")
        )
    parsed: list[Path] = []
    for rule in rules:
        try:
            parsed.append(parse(rule))
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"{name}: {exc}") from None
        if not whole and all(segment is DEEP for segment in parsed[-1]):
            raise ValueError(
                f"{name}: {rule!r} would replace the whole payload, which must stay "
                "an object; name the fields instead"
            )
    return tuple(parsed)


def _table(rules: object, name: str) -> _Table:
    if not isinstance(rules, Mapping):
        found = _paths(rules, name)
        return {"*": found} if found else {}
    table: _Table = {}
    for step, paths in rules.items():
        if not isinstance(step, str) or not step:
            raise TypeError(f"{name}: step names are non-empty strings, not {step!r}")
        table[step] = _paths(paths, f"{name}[{step!r}]")
    return table


def _for_step(table: _Table, step: str) -> tuple[Path, ...]:
    return table.get(step, ()) + table.get("*", ())


_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _header_names(names: object) -> frozenset[str]:
    if isinstance(names, str | bytes) or not isinstance(names, Collection):
        raise TypeError(
            f"http_headers takes a list of header names, not {type(names).__name__}"
        )
    for header in names:
        if not isinstance(header, str) or not _TOKEN.fullmatch(header):
            raise ValueError(f"http_headers: {header!r} is not a header name")
    return frozenset(header.lower() for header in names)
