"""What ``inspect`` shows of a durable execution: its key, interruption and resumes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import click

from ..record.model import RecordStatus, RecordSummary
from ..store.durable import DurableStore

if TYPE_CHECKING:
    from .._util.jsonvalue import JSONObject
    from ..store.protocol import ExecutionStore


def resumed_rows(store: ExecutionStore, rows: Iterable[object]) -> dict[str, str]:
    """Which listed interrupted records another execution resumed, by id.

    Only ``incomplete`` rows are asked about (one link lookup each): a record
    that finished was never resumed.
    """
    if not isinstance(store, DurableStore):
        return {}
    found: dict[str, str] = {}
    for row in rows:
        if isinstance(row, RecordSummary) and row.status is RecordStatus.INCOMPLETE:
            by = store.resumed_by(row.execution_id)
            if by is not None:
                found[row.execution_id] = by
    return found


def print_durable(links: JSONObject) -> None:
    """Print the lines of ``links`` that say something, for people."""
    if links["idempotencyKey"] is not None:
        click.echo(f"idempotency key: {links['idempotencyKey']}")
    if links["resumeOf"] is not None:
        click.echo(
            f"resumes:         {links['resumeOf']} (attempt {links['resumeAttempt']})"
        )
    if links["interrupted"]:
        by = links["resumedBy"]
        click.echo(
            "interrupted:     "
            + (f"resumed by {by}" if by else "not resumed (intentusnet resume ID)")
        )
    elif links["resumedBy"] is not None:
        click.echo(f"resumed by:      {links['resumedBy']}")
    waiting = links.get("waiting")
    if isinstance(waiting, dict):
        due = waiting.get("dueUtc")
        click.echo(
            f"waiting:         for {waiting.get('waitingFor')} "
            f"{waiting.get('name')!r}" + (f" until {due}" if due else " (no timeout)")
        )
    attention = links["attention"]
    if isinstance(attention, dict):
        click.echo(
            click.style("needs attention: ", fg="magenta")
            + f"{attention.get('reason')}: {attention.get('message')}"
        )
    commands = links["commands"]
    if isinstance(commands, list):
        for command in commands:
            click.echo(f"  to move it on:  {command}")
