"""A price table: what a million tokens of each model cost, in the user's currency.

The table is a file the user writes (JSON, or TOML when its name ends in
``.toml``)::

    {"currency": "USD",
     "models": {"gpt-4o-mini": {"input": 0.15, "output": 0.60},
                "claude-3-5-haiku*": {"input": 0.80, "output": 4.00}}}

Prices are per million tokens. A model name is matched exactly, or by the
longest pattern ending in ``*`` that it starts with (``*`` is allowed only at
the end). Loading checks every field and names the file, the model and the
field of the first problem.

Without a table of the user's, the commands price LLM calls from the prices the
``genai-prices`` package publishes (USD; :func:`price_table`); a user's table in
USD overrides them model by model, one in another currency replaces them.
"""

from __future__ import annotations

import importlib.util
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import orjson

from ..errors import PriceTableError

__all__ = ["ModelPrice", "PriceTable", "price_table"]

_FIELDS: Final = ("input", "output")
_USD: Final = "USD"
#: Whether the published prices can be had (found, not imported: that waits for
#: the first cost asked for).
_HAVE_PUBLISHED: Final = importlib.util.find_spec("genai_prices") is not None
_PER: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """The price of a million input and of a million output tokens of a model.

    Added in 0.1.0.
    """

    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """What these tokens cost."""
        return (input_tokens * self.input + output_tokens * self.output) / _PER


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices per million tokens by model name, in one currency.

    ``models`` maps a model name, or a prefix followed by ``*``, to its
    :class:`ModelPrice`. Build one with :meth:`load` (a file) or
    :meth:`from_json` (a parsed document); both check every field. With
    ``published`` (USD only), a model the table does not name is priced from
    the ``genai-prices`` package (:meth:`published_prices`, :func:`price_table`).

    Added in 0.1.0.
    """

    currency: str
    models: Mapping[str, ModelPrice]
    published: bool = False

    @classmethod
    def published_prices(cls) -> PriceTable:
        """The prices ``genai-prices`` publishes, in USD (added in 0.1.0).

        The package (the ``prices`` extra, also in ``server``) is imported at
        the first cost asked for; without it every model is unpriced.
        """
        return cls(_USD, {}, published=True)

    @classmethod
    def load(cls, path: str | Path) -> PriceTable:
        """Read a price table file: TOML if its name ends in ``.toml``, else JSON.

        Raises:
            PriceTableError: the file cannot be read or parsed, or a field is
                wrong; the message names the file, the model and the field.
        """
        where = str(path)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise PriceTableError(where, f"cannot read: {exc.strerror or exc}") from exc
        try:
            if where.endswith(".toml"):
                parsed: object = tomllib.loads(data.decode("utf-8"))
            else:
                parsed = orjson.loads(data)
        except (orjson.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            kind = "TOML" if where.endswith(".toml") else "JSON"
            raise PriceTableError(where, f"not valid {kind}: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise PriceTableError(where, f"not UTF-8 text: {exc}") from exc
        return cls.from_json(parsed, where)

    @classmethod
    def from_json(cls, document: object, source: str = "price table") -> PriceTable:
        """A price table from a parsed document (``source`` names it in errors).

        Raises:
            PriceTableError: a field is missing, unknown or wrong.
        """
        if not isinstance(document, dict):
            raise PriceTableError(source, "must be an object with currency, models")
        unknown = sorted(set(document) - {"currency", "models"})
        if unknown:
            raise PriceTableError(
                source, f"unknown field {unknown[0]!r}; the fields are currency, models"
            )
        currency = document.get("currency")
        if not isinstance(currency, str) or not currency.strip():
            raise PriceTableError(
                source, f"currency: must be a non-empty text, not {currency!r}"
            )
        models = document.get("models")
        if not isinstance(models, dict):
            raise PriceTableError(
                source, "models: must be an object mapping model names to prices"
            )
        prices = {
            _name(source, name): _price(source, name, value)
            for name, value in models.items()
        }
        return cls(currency.strip(), prices)

    def price_of(self, model: str | None) -> ModelPrice | None:
        """The price of ``model``: exact name, else the longest ``prefix*``."""
        if model is None:
            return None
        found = self.models.get(model)
        if found is not None:
            return found
        matches = [
            (len(name), price)
            for name, price in self.models.items()
            if name.endswith("*") and model.startswith(name[:-1])
        ]
        return max(matches, key=lambda match: match[0])[1] if matches else None

    def cost(
        self, model: str | None, input_tokens: int, output_tokens: int
    ) -> float | None:
        """What the tokens cost with ``model``'s price; None if it has none."""
        price = self.price_of(model)
        if price is not None:
            return price.cost(input_tokens, output_tokens)
        if not self.published or model is None:
            return None
        return _published_cost(model, input_tokens, output_tokens)


def price_table(path: str | None) -> PriceTable | None:
    """The prices the commands use: the user's table at ``path``, else the published.

    A table in USD falls back on the published prices for the models it does
    not name; one in another currency stands alone. Without ``path`` and
    without the ``genai-prices`` package: None (costs are not shown).

    Raises:
        PriceTableError: the file cannot be read, or a field is wrong.
    """
    if path:
        table = PriceTable.load(path)
        return replace(table, published=table.currency == _USD and _HAVE_PUBLISHED)
    return PriceTable.published_prices() if _HAVE_PUBLISHED else None


def _published_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """What ``genai-prices`` says the tokens cost with ``model``; None if unknown."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    try:
        return float(calc_price(usage, model).total_price)
    except LookupError:
        return None


def _name(source: str, name: str) -> str:
    if not name or "*" in name[:-1]:
        raise PriceTableError(
            source,
            f"models[{name!r}]: a model name, or a prefix ending in '*' "
            "('*' only at the end)",
        )
    return name


def _price(source: str, name: str, value: object) -> ModelPrice:
    where = f"models[{name!r}]"
    if not isinstance(value, dict):
        raise PriceTableError(
            source, f"{where}: must be an object with input, output (per 1M tokens)"
        )
    unknown = sorted(set(value) - set(_FIELDS))
    if unknown:
        raise PriceTableError(
            source, f"{where}.{unknown[0]}: unknown field; the fields are input, output"
        )
    numbers: list[float] = []
    for field in _FIELDS:
        if field not in value:
            raise PriceTableError(
                source, f"{where}.{field}: missing (the price of 1M {field} tokens)"
            )
        number = value[field]
        if (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or not math.isfinite(number)
            or number < 0
        ):
            raise PriceTableError(
                source, f"{where}.{field}: must be a number >= 0, not {number!r}"
            )
        numbers.append(float(number))
    return ModelPrice(*numbers)
