"""The file store's running totals of LLM usage: the ``usage_totals`` table.

One row per provider and model: how many completed records' answers carry
token usage (``store.usage``) and the sum of their input and output tokens.
Triggers on ``records`` keep it in the same transaction as the rows they count,
as ``counts`` is kept, so a savings report reads a few rows however many records
the store holds. Each row carries a checksum of its values, computed in SQL by
the triggers and checked when read.

The model is NULL when the answer named none; rows are matched with ``IS`` so a
NULL model is one row like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..usage import UsageTotal
from .catalog_seal import DamagedRow, parts_seal, seal_sql

if TYPE_CHECKING:
    import sqlite3

_NO_MODEL: Final = "\x00"  # a NULL model in the seal's text


def _seal_sql(provider: str, model: str, calls: str, tokens_in: str, out: str) -> str:
    """SQL of a row's seal: the same text :func:`_seal` seals in Python."""
    return seal_sql(provider, f"ifnull({model}, char(0))", calls, tokens_in, out)


def _seal(total: UsageTotal) -> int:
    model = _NO_MODEL if total.model is None else total.model
    return parts_seal(
        total.provider,
        model,
        total.calls,
        total.input_tokens,
        total.output_tokens,
    )


def _change(row: str, sign: str) -> str:
    """Statements adding (``+``) or taking away (``-``) one row's usage."""
    provider = f"json_extract({row}.usage, '$[0]')"
    model = f"json_extract({row}.usage, '$[1]')"
    tokens_in = f"json_extract({row}.usage, '$[2]')"
    out = f"json_extract({row}.usage, '$[3]')"
    calls_sql = f"calls {sign} 1"
    in_sql = f"input_tokens {sign} {tokens_in}"
    out_sql = f"output_tokens {sign} {out}"
    statements = (
        f"UPDATE usage_totals SET calls = {calls_sql}, input_tokens = {in_sql}, "
        f"output_tokens = {out_sql}, seal = "
        + _seal_sql("provider", "model", calls_sql, in_sql, out_sql)
        + f" WHERE provider = {provider} AND model IS {model};"
    )
    if sign == "+":  # the first record of its provider and model
        statements += (
            f" INSERT INTO usage_totals SELECT {provider}, {model}, 1, {tokens_in}, "
            f"{out}, "
            + _seal_sql(provider, model, "1", tokens_in, out)
            + " WHERE NOT EXISTS (SELECT 1 FROM usage_totals "
            f"WHERE provider = {provider} AND model IS {model});"
        )
    return statements


def _counted(row: str) -> str:
    return f"{row}.status = 'completed' AND {row}.usage IS NOT NULL"


#: The table and its index.
TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS usage_totals (provider TEXT NOT NULL, model TEXT, "
    "calls INTEGER NOT NULL, input_tokens INTEGER NOT NULL, "
    "output_tokens INTEGER NOT NULL, seal INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS usage_totals_by_model "
    "ON usage_totals (provider, model)",
)
#: The four triggers on ``records`` keeping the table.
TRIGGERS: Final = (
    "CREATE TRIGGER IF NOT EXISTS usage_added AFTER INSERT ON records "
    f"WHEN {_counted('new')} BEGIN {_change('new', '+')} END",
    "CREATE TRIGGER IF NOT EXISTS usage_replaced AFTER UPDATE ON records "
    f"WHEN {_counted('old')} BEGIN {_change('old', '-')} END",
    "CREATE TRIGGER IF NOT EXISTS usage_updated AFTER UPDATE ON records "
    f"WHEN {_counted('new')} BEGIN {_change('new', '+')} END",
    "CREATE TRIGGER IF NOT EXISTS usage_removed AFTER DELETE ON records "
    f"WHEN {_counted('old')} BEGIN {_change('old', '-')} END",
)
#: The table, its index and the four triggers keeping it.
DDL: Final = (*TABLE, *TRIGGERS)


def recount(db: sqlite3.Connection) -> None:
    """Derive the totals from ``records`` again (after a rebuild)."""
    db.execute("DELETE FROM usage_totals")
    provider = "json_extract(usage, '$[0]')"
    model = "json_extract(usage, '$[1]')"
    calls = "count(*)"
    tokens_in = "sum(json_extract(usage, '$[2]'))"
    out = "sum(json_extract(usage, '$[3]'))"
    db.execute(
        f"INSERT INTO usage_totals SELECT {provider}, {model}, {calls}, {tokens_in}, "
        f"{out}, "
        + _seal_sql(provider, model, calls, tokens_in, out)
        + f" FROM records WHERE {_counted('records')} GROUP BY 1, 2"
    )


def totals(db: sqlite3.Connection) -> list[UsageTotal]:
    """Every provider's and model's totals with calls, each checked."""
    found = []
    for *values, seal in db.execute(
        "SELECT provider, model, calls, input_tokens, output_tokens, seal "
        "FROM usage_totals WHERE calls > 0 ORDER BY provider, model"
    ):
        total = UsageTotal(*values)
        if _seal(total) != seal:
            raise DamagedRow(f"the usage totals of {total.provider} {total.model}")
        found.append(total)
    return found
