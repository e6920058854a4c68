"""Canonical JSON (RFC 8785) and the envelope hash.

``canonical_json`` produces the JSON Canonicalization Scheme bytes of a value. The
common case goes through orjson with sorted keys, which gives the same bytes as
RFC 8785 except for a few known shapes: floats that orjson prints differently
(integral floats such as ``1.0``, exponents, tiny fractions), integers of 16 or
more digits, and keys outside the Basic Multilingual Plane (RFC 8785 sorts keys
by UTF-16 code units). ``check_json``, which every value passes through anyway,
notes whether any of those shapes occur; if so, the value takes the reference
algorithm written out below. A property test holds both paths against the
``rfc8785`` package.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Final, Protocol, cast

from orjson import OPT_SORT_KEYS, JSONEncodeError, dumps

from ._util.jsonvalue import JSONValue, check_json
from .errors import EnvelopeValidationError

__all__ = [
    "HASH_PATTERN",
    "HASH_PREFIX",
    "HashableEnvelope",
    "canonical_json",
    "compute_hash",
    "hash_bytes",
    "hash_parts",
    "hashed_view",
    "view",
]

HASH_PREFIX: Final = "sha256:"
#: A whole hash as this module writes it (a regular expression to match whole).
HASH_PATTERN: Final = r"sha256:[0-9a-f]{64}"


class HashableEnvelope(Protocol):
    """An envelope that holds the canonical bytes of its view around the payload.

    ``IntentEnvelope`` is one: it is frozen, so only its payload is encoded per
    hash.
    """

    @property
    def payload(self) -> dict[str, JSONValue]:
        """The payload (checked by the envelope when it was made)."""

    @property
    def hash_parts(self) -> tuple[bytes, bytes, bool]:
        """The view's canonical bytes around the payload, and its verdict.

        That is ``(prefix, suffix, plain)``: ``plain`` says whether orjson's
        sorted output of the payload is RFC 8785.
        """


def canonical_json(value: JSONValue) -> bytes:
    """Return the RFC 8785 canonical JSON encoding of ``value``.

    Raises:
        EnvelopeValidationError: ``value`` holds something JSON cannot carry (NaN,
            infinities, non-string keys, bytes, sets, arbitrary objects, integers
            beyond +-(2**53-1)); the message names the path.
    """
    return _encode(value, plain=check_json(value))


def _encode(value: JSONValue, *, plain: bool) -> bytes:
    # ``plain``: check_json found none of the shapes where orjson and RFC 8785
    # differ, so orjson's sorted output is the canonical form.
    if plain:
        return dumps(value, option=OPT_SORT_KEYS)
    return _reference(value).encode("utf-8")


def hashed_view(wire: dict[str, JSONValue]) -> dict[str, JSONValue]:
    """Return the hashed view of an envelope given in wire form (camelCase).

    Omitted fields take the envelope's defaults, so a wire envelope read from a
    file and the model built from it have the same view.
    """
    intent = wire.get("intent")
    context = wire.get("context")
    routing = wire.get("routing")
    intent_d = intent if isinstance(intent, dict) else {}
    context_d = context if isinstance(context, dict) else {}
    routing_d = routing if isinstance(routing, dict) else {}
    return view(
        version=wire.get("version", "1.0"),
        name=intent_d.get("name"),
        intent_version=intent_d.get("version", "1.0"),
        payload=wire.get("payload", {}),
        tenant=context_d.get("tenant"),
        strategy=routing_d.get("strategy", "DIRECT"),
        target_agent=routing_d.get("targetAgent"),
        fallback_agents=routing_d.get("fallbackAgents", []),
    )


def view(
    *,
    version: JSONValue,
    name: JSONValue,
    intent_version: JSONValue,
    payload: JSONValue,
    tenant: JSONValue,
    strategy: JSONValue,
    target_agent: JSONValue,
    fallback_agents: JSONValue,
) -> dict[str, JSONValue]:
    """Return the hashed view (DESIGN §3) of an envelope's hashed fields.

    The one place the view's shape is written: :func:`hashed_view` reads the
    fields from a wire envelope, the envelope model passes its own attributes.
    """
    return {
        "version": version,
        "intent": {"name": name, "version": intent_version},
        "payload": payload,
        "tenant": tenant,
        "routing": {
            "strategy": strategy,
            "targetAgent": target_agent,
            "fallbackAgents": fallback_agents,
        },
    }


def hash_bytes(data: bytes) -> str:
    """Return ``"sha256:"`` + the hex SHA-256 of ``data``."""
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def compute_hash(envelope: HashableEnvelope | Mapping[str, JSONValue]) -> str:
    """Return the envelope hash: ``"sha256:"`` + hex SHA-256 of its canonical view.

    Args:
        envelope: an ``IntentEnvelope``, or an envelope in wire form (a dict, or
            another mapping, as found in a record file or an envelope JSON file).

    Raises:
        EnvelopeValidationError: ``envelope`` is neither; or a wire-form
            envelope holds a value JSON cannot carry in a hashed field, and the
            message names its path. (A model refused such values when it was
            built.)
    """
    # A model is asked for its parts first: whether an object is a Mapping is
    # an ABC check, which costs a model's hash as much as a tenth of its time.
    parts: tuple[bytes, bytes, bool] | None = (
        None if isinstance(envelope, dict) else getattr(envelope, "hash_parts", None)
    )
    if parts is None:
        if isinstance(envelope, Mapping):
            view = hashed_view(envelope if type(envelope) is dict else dict(envelope))
            return hash_bytes(_encode(view, plain=_check_view(view)))
        raise EnvelopeValidationError(
            "an envelope must be a JSON object (a dict) or an IntentEnvelope, "
            f"not {type(envelope).__name__}"
        )
    # The model checked its payload at construction and kept the verdict, and
    # holds the canonical bytes of the rest of the view (it is frozen): only the
    # payload is encoded per call.
    prefix, suffix, plain = parts
    digest = hashlib.sha256(prefix)
    model = cast(HashableEnvelope, envelope)  # it has the parts
    digest.update(_encode(model.payload, plain=plain))
    digest.update(suffix)
    return HASH_PREFIX + digest.hexdigest()


def hash_parts(
    view: dict[str, JSONValue], *, typed: bool = False
) -> tuple[bytes, bytes]:
    """Split a hashed view's canonical bytes around its payload.

    Returns ``(prefix, suffix)`` such that ``prefix + canonical_json(payload) +
    suffix == canonical_json(view)``: the keys of the view sort as ``intent``,
    ``payload``, ``routing``, ``tenant``, ``version``.

    ``typed``: the parts beside the payload are an envelope model's typed
    fields (strings, None and a list of strings, under fixed ASCII keys),
    which orjson with sorted keys writes as RFC 8785 does, so they are not
    walked first; a lone surrogate in a string, which orjson refuses, is then
    checked and named as it is without ``typed``.
    """
    encode = _typed_json if typed else canonical_json
    return (
        b'{"intent":' + encode(view["intent"]) + b',"payload":',
        b',"routing":'
        + encode(view["routing"])
        + b',"tenant":'
        + encode(view["tenant"])
        + b',"version":'
        + encode(view["version"])
        + b"}",
    )


def _typed_json(value: JSONValue) -> bytes:
    try:
        return dumps(value, option=OPT_SORT_KEYS)
    except JSONEncodeError:
        return canonical_json(value)  # names what orjson refused


#: Where each part of the hashed view lives in the wire form, for error paths.
_WIRE_PATHS: Final = {"tenant": "context.tenant"}


def _check_view(view: dict[str, JSONValue]) -> bool:
    # Each part from its own root, as the model checks its payload: a payload
    # at the nesting limit must hash from its wire form too.
    plain = True
    for key, part in view.items():
        plain = check_json(part, _WIRE_PATHS.get(key, key)) and plain
    return plain


# -- the reference algorithm (RFC 8785 section 3.2) -------------------------------

_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_NEEDS_ESCAPE: Final = re.compile(r'["\\\x00-\x1f]')


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    return _ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _string(text: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, text) + '"'


def _number(value: int | float) -> str:
    if type(value) is int:
        return str(value)
    if value == 0:
        return "0"  # also for -0.0
    # repr gives the shortest round-trip digits; RFC 8785 (ECMAScript
    # Number.prototype.toString) lays them out differently.
    digits, _, exp_text = repr(value).partition("e")
    sign = "-" if digits.startswith("-") else ""
    digits = digits.lstrip("-")
    exponent = int(exp_text) if exp_text else 0
    whole, _, frac = digits.partition(".")
    frac = frac.rstrip("0") if frac != "0" else ""
    mantissa = (whole + frac).lstrip("0")
    # the decimal exponent n such that value = 0.mantissa * 10**n
    n = (
        len(whole.lstrip("0")) + exponent
        if whole != "0"
        else exponent - (len(frac) - len(frac.lstrip("0")))
    )
    k = len(mantissa)
    if k <= n <= 21:
        return sign + mantissa + "0" * (n - k)
    if 0 < n <= 21:
        return sign + mantissa[:n] + "." + mantissa[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + mantissa
    e = n - 1
    exp_str = f"e+{e}" if e >= 0 else f"e-{-e}"
    if k == 1:
        return sign + mantissa + exp_str
    return sign + mantissa[0] + "." + mantissa[1:] + exp_str


def _reference(value: JSONValue) -> str:
    # Recursion depth is bounded by check_json's MAX_DEPTH, which ran first.
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("non-finite float")  # unreachable after check_json
        return _number(value)
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(f"{_string(k)}:{_reference(v)}" for k, v in items) + "}"
    return "[" + ",".join(_reference(v) for v in value) + "]"
