"""What a re-ask found: the recorded answer and the new ones, side by side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._util.jsonvalue import JSONObject, JSONValue
from ..replay import diff_paths
from ._answers import answer_body, answer_text
from .usage import recorded_call_usage

if TYPE_CHECKING:
    from ..cache.prices import PriceTable
    from .usage import Usage


@dataclass(frozen=True, slots=True)
class ReaskAnswer:
    """One answer to a model call: recorded before, or asked now. Added in 0.1.0.

    Attributes:
        status: the HTTP status, ``None`` when no response came.
        text: what the model said (the body as recorded when no text is
            found in it), or the failure's text.
        usage: the tokens the answer reports, if it does.
        response: the response as recorded (``status``, ``headers``,
            ``body``), ``None`` when no response came.
        record: the transport record holding the answer.
        error: the failure's text, when the call failed.
    """

    status: int | None
    text: str
    usage: Usage | None
    response: JSONObject | None
    record: str | None
    error: str | None

    def cost(self, prices: PriceTable | None) -> float | None:
        """What the answer's tokens cost, ``None`` without a price or counts."""
        usage = self.usage
        if prices is None or usage is None:
            return None
        if usage.input_tokens is None or usage.output_tokens is None:
            return None
        return prices.cost(
            usage.model or usage.response_model,
            usage.input_tokens,
            usage.output_tokens,
        )

    def to_json(self, prices: PriceTable | None = None) -> JSONObject:
        """Return the camelCase wire form."""
        return {
            "status": self.status,
            "text": self.text,
            "usage": None if self.usage is None else dict(self.usage.as_json()),
            "cost": self.cost(prices),
            "record": self.record,
            "error": self.error,
        }


def answer_of(
    request: JSONObject,
    response: JSONValue,
    error: str | None,
    record: str | None,
) -> ReaskAnswer:
    """An answer from a request and its recorded response (or failure)."""
    if not isinstance(response, dict):
        return ReaskAnswer(None, error or "no answer", None, None, record, error)
    status = response.get("status")
    return ReaskAnswer(
        status=status if isinstance(status, int) else None,
        text=answer_text(response),
        usage=recorded_call_usage(request, response),
        response=response,
        record=record,
        error=error,
    )


@dataclass(frozen=True, slots=True)
class ReaskResult:
    """A re-asked model call: the request sent, the recorded and new answers.

    Added in 0.1.0.

    Attributes:
        source_execution_id: the record holding the call asked again.
        step: its step number there (``None``: the record is the call's own).
        execution_id: the re-ask's own record (intent ``intentusnet.reask``).
        request: the JSON body sent, edits applied.
        changed: the body paths the edits changed.
        recorded: the answer the record holds.
        answers: the new answers, one per ask.
        prices: the price table the costs are read from, if one was given.
    """

    source_execution_id: str
    step: int | None
    execution_id: str
    request: JSONObject
    changed: tuple[str, ...]
    recorded: ReaskAnswer
    answers: tuple[ReaskAnswer, ...]
    prices: PriceTable | None = None

    @property
    def currency(self) -> str | None:
        """The price table's currency, if costs are given."""
        return None if self.prices is None else self.prices.currency

    def differences(self, answer: ReaskAnswer) -> list[str]:
        """The paths where ``answer``'s body differs from the recorded one.

        Bodies that are not JSON (streams) are compared by their text
        (``text``, when it differs).
        """
        old, new = self.recorded.response, answer.response
        if old is None or new is None:
            return [] if old is new else ["response"]
        before, after = answer_body(old), answer_body(new)
        if before is None or after is None:
            return [] if self.recorded.text == answer.text else ["text"]
        return diff_paths(before, after)

    def token_difference(self, answer: ReaskAnswer) -> tuple[int | None, int | None]:
        """New minus recorded input and output tokens (``None``: a count is missing)."""
        old, new = self.recorded.usage, answer.usage
        if old is None or new is None:
            return None, None
        return (
            _minus(new.input_tokens, old.input_tokens),
            _minus(new.output_tokens, old.output_tokens),
        )

    def cost_difference(self, answer: ReaskAnswer) -> float | None:
        """New minus recorded cost, with the price table (``None`` without)."""
        old, new = self.recorded.cost(self.prices), answer.cost(self.prices)
        return None if old is None or new is None else new - old

    @property
    def override(self) -> dict[int | str, JSONValue]:
        """The first new answer as a re-run override of the step.

        ``rerun(engine, router, RerunOptions(override=result.override))``
        serves the step this answer, so the rest of the agent reacts to it.
        Empty when the call is no step or no response came.
        """
        response = self.answers[0].response if self.answers else None
        if self.step is None or response is None:
            return {}
        return {self.step: response}

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form (what ``intentusnet reask --json`` prints)."""
        answers: list[JSONValue] = []
        for answer in self.answers:
            tokens = self.token_difference(answer)
            answers.append(
                {
                    **answer.to_json(self.prices),
                    "differences": list[JSONValue](self.differences(answer)),
                    "inputTokensDifference": tokens[0],
                    "outputTokensDifference": tokens[1],
                    "costDifference": self.cost_difference(answer),
                }
            )
        return {
            "sourceExecutionId": self.source_execution_id,
            "step": self.step,
            "executionId": self.execution_id,
            "request": self.request,
            "changed": list[JSONValue](self.changed),
            "currency": self.currency,
            "recorded": self.recorded.to_json(self.prices),
            "answers": answers,
        }


def _minus(new: int | None, old: int | None) -> int | None:
    return None if new is None or old is None else new - old
