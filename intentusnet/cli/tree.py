"""The tree of executions a record belongs to: its parents and its child intents.

A child intent routed with ``ctx.route`` names its parent in its header, and
the parent names the child in its ``route:`` step; ``inspect`` walks up to the
root and down again. Records that cannot be loaded show as ``missing``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import click

from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import IntentusNetError
from .output import status_text

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord
    from ..store import ExecutionStore

#: Bounds on the walk: a tree is shown, not crawled.
MAX_NODES: Final = 200
MAX_DEPTH: Final = 32


def execution_tree(store: ExecutionStore, record: ExecutionRecord) -> JSONObject:
    """Return the tree ``record`` belongs to, from its root (``inspect --json``)."""
    root = record
    seen = {record.execution_id}
    for _ in range(MAX_DEPTH):
        parent = root.header.parent_execution_id
        if parent is None or parent in seen:
            break
        try:
            root = store.load(parent)
        except IntentusNetError:
            break
        seen.add(parent)
    budget = [MAX_NODES]
    return _node(store, root, record.execution_id, None, budget, 0)


def _node(
    store: ExecutionStore,
    record: ExecutionRecord,
    current: str,
    via: str | None,
    budget: list[int],
    depth: int,
) -> JSONObject:
    from ..steps.view import record_steps

    budget[0] -= 1
    children: list[JSONValue] = []
    header = record.header
    for step in record_steps(record) if depth < MAX_DEPTH else ():
        child_id = step.child_execution_id
        # A step served from a record routed no child in this execution.
        if child_id is None or step.source == "record" or budget[0] <= 0:
            continue
        called = f"{step.name}, step {step.number}"
        try:
            child = store.load(child_id)
        except IntentusNetError:
            budget[0] -= 1
            children.append(_missing(child_id, called))
            continue
        children.append(_node(store, child, current, called, budget, depth + 1))
    return {
        "executionId": record.execution_id,
        "intent": f"{header.intent_name}@{header.intent_version}",
        "status": header.status.value,
        "agent": header.agent,
        "via": via,
        "current": record.execution_id == current,
        "children": children,
    }


def _missing(execution_id: str, via: str) -> JSONObject:
    return {
        "executionId": execution_id,
        "intent": None,
        "status": "missing",
        "agent": None,
        "via": via,
        "current": False,
        "children": [],
    }


def print_tree(tree: JSONObject) -> None:
    """Print the tree, if there is more than the record itself."""
    if not tree["children"]:
        return
    click.secho("\nTree", bold=True)
    _print_node(tree, "  ", "  ")


def _print_node(node: JSONObject, first: str, rest: str) -> None:
    via = f"  ({node['via']})" if node["via"] else ""
    here = click.style("  <- this record", bold=True) if node["current"] else ""
    click.echo(
        f"{first}{node['executionId']}  {node['intent'] or '?'}  "
        f"{status_text(str(node['status']))}{via}{here}"
    )
    children = node["children"]
    assert isinstance(children, list)
    for index, child in enumerate(children):
        assert isinstance(child, dict)
        last = index == len(children) - 1
        _print_node(
            child, rest + ("└─ " if last else "├─ "), rest + ("   " if last else "│  ")
        )
