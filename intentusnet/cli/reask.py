"""``reask``: send one recorded model call again, edited, and compare the answers.

``reask ID --step N [--set PATH=JSON ...] [--model M] [--times K]`` prints
the recorded answer and the new ones side by side, the paths the edits
changed and the token (and, with ``--prices``, cost) difference.
``rerun ID --reask STEP`` uses :func:`reasked_override` to serve the step the
new answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import click

from .._util.jsonvalue import JSONValue
from ..errors import ReaskRefused
from .context import ExecutionId, check_last_intent, last_intent_option, open_store
from .output import emit_json, table
from .params import options

if TYPE_CHECKING:
    from ..integrations.reask import ReaskAnswer, ReaskResult
    from ..record.model import ExecutionRecord
    from ..store.protocol import ExecutionStore

#: Exit code when an ask got no answer or an HTTP error (as a failed re-run).
ASK_FAILED: Final = 8


def _edits(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[tuple[str, JSONValue], ...]:
    """``PATH=JSON``s: a request body path and the value to set there."""
    from ..steps.reask import parse_edit

    try:
        return tuple(parse_edit(value) for value in values)
    except ReaskRefused as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


#: ``--set``, ``--model`` and ``--key-env``, shared by ``reask`` and ``rerun``.
edit_options = options(
    click.option(
        "--set",
        "edits",
        metavar="PATH=JSON",
        multiple=True,
        callback=_edits,
        help="Set this value in the recorded request's JSON body before "
        "sending it, e.g. temperature=0.2 or messages[0].content='\"Hi\"' "
        "(repeatable).",
    ),
    click.option("--model", metavar="M", help="Ask model M instead."),
    click.option(
        "--key-env",
        metavar="VAR",
        help="Read the API key from VAR instead of OPENAI_API_KEY or "
        "ANTHROPIC_API_KEY.",
    ),
)


def reasked_override(
    store: ExecutionStore,
    record: ExecutionRecord,
    step: int,
    edits: tuple[tuple[str, JSONValue], ...],
    model: str | None,
    key_env: str | None,
) -> tuple[ReaskResult, JSONValue]:
    """Re-ask step ``step`` once: the result and the response to serve for it.

    Raises:
        ReaskRefused: as ``reask``; also when no response came back.
    """
    from ..integrations.reask import reask

    result = reask(
        record, step, store=store, edits=dict(edits), model=model, key_env=key_env
    )
    served = result.override.get(step)
    if served is None:
        answer = result.answers[0]
        raise ReaskRefused(
            f"re-asking step {step} got no response ({answer.error}); the "
            f"re-ask's record: {result.execution_id}"
        )
    return result, served


@click.command()
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@click.option(
    "--step",
    type=click.IntRange(min=1),
    metavar="N",
    help="The model call's step number in record ID (leave it out when ID is "
    "the call's own record).",
)
@edit_options
@click.option(
    "--times",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    metavar="K",
    help="Ask K times, to see the spread.",
)
@click.option(
    "--prices",
    "prices_file",
    envvar="INTENTUSNET_PRICES",
    show_envvar=True,
    metavar="FILE",
    help="Price table (JSON, or TOML as *.toml), to show the cost difference.",
)
@last_intent_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def reask(
    execution_id: str,
    step: int | None,
    edits: tuple[tuple[str, JSONValue], ...],
    model: str | None,
    key_env: str | None,
    times: int,
    prices_file: str | None,
    as_json: bool,
) -> None:
    """Send a recorded model call again, edited, and compare the answers."""
    from ..cache.prices import price_table
    from ..integrations.reask import reask as reask_call

    check_last_intent()
    prices = price_table(prices_file)
    store = open_store()
    result = reask_call(
        store.load(execution_id),
        step,
        store=store,
        edits=dict(edits),
        model=model,
        times=times,
        prices=prices,
        key_env=key_env,
    )
    if as_json:
        emit_json(result.to_json())
    else:
        print_reask(result)
    if any(answer.error or (answer.status or 0) >= 400 for answer in result.answers):
        raise click.exceptions.Exit(ASK_FAILED)


def print_reask(result: ReaskResult) -> None:
    """The recorded and new answers side by side, then their texts."""
    where = "" if result.step is None else f"step {result.step} of "
    click.echo(f"Re-asked {where}{result.source_execution_id} as {result.execution_id}")
    click.echo(f"  changed: {', '.join(result.changed) or 'nothing'}")
    answers = [result.recorded, *result.answers]
    headers = ["", "recorded", *(f"ask {n}" for n in range(1, len(answers)))]
    currency = result.currency
    rows = [
        ["status", *(str(a.status or "-") for a in answers)],
        ["model", *(_model(a) for a in answers)],
        ["tokens in", *(_tokens(result, a, 0) for a in answers)],
        ["tokens out", *(_tokens(result, a, 1) for a in answers)],
    ]
    if currency is not None:
        rows.append([f"cost ({currency})", *(_cost(result, a) for a in answers)])
    rows.append(["record", *(a.record or "-" for a in answers)])
    table(headers, rows)
    for number, answer in enumerate(answers):
        label = "Recorded answer" if number == 0 else f"Answer {number}"
        if number:
            differs = result.differences(answer)
            label += f" (differs at: {', '.join(differs)})" if differs else " (same)"
        click.secho(f"\n{label}", bold=True)
        click.echo("  " + answer.text.replace("\n", "\n  "))


def _model(answer: ReaskAnswer) -> str:
    usage = answer.usage
    return "-" if usage is None else usage.response_model or usage.model or "-"


def _tokens(result: ReaskResult, answer: ReaskAnswer, which: int) -> str:
    usage = answer.usage
    count = None
    if usage is not None:
        count = usage.input_tokens if which == 0 else usage.output_tokens
    if count is None:
        return "-"
    if answer is result.recorded:
        return str(count)
    change = result.token_difference(answer)[which]
    return str(count) if change is None else f"{count} ({change:+d})"


def _cost(result: ReaskResult, answer: ReaskAnswer) -> str:
    cost = answer.cost(result.prices)
    if cost is None:
        return "-"
    if answer is result.recorded:
        return f"{cost:.6f}"
    change = result.cost_difference(answer)
    return f"{cost:.6f}" + ("" if change is None else f" ({change:+.6f})")
