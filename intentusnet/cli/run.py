"""``intentusnet run``: route one envelope through an application's router."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

import click

from .output import emit_json
from .params import USAGE, CliFailure, read_json_object

if TYPE_CHECKING:
    from ..routing.router import IntentRouter


@click.command()
@click.option(
    "--app",
    "app_ref",
    required=True,
    metavar="MODULE:ATTR",
    help="The IntentRouter to use, e.g. myapp.routing:router.",
)
@click.argument("envelope_file", metavar="ENVELOPE_FILE")
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
def run(app_ref: str, envelope_file: str, as_json: bool) -> None:
    """Route the envelope in ENVELOPE_FILE (- for stdin) and print the response.

    The router records to its own store, as the application configured it. The
    response JSON says whether the intent succeeded (status), so an agent's
    failure still exits 0.
    """
    envelope = read_json_object(envelope_file)
    router = load_router(app_ref)
    try:
        response = router.route_intent(envelope)
    finally:
        router.close()
    emit_json(response.to_wire(), compact=as_json)


def load_router(ref: str) -> IntentRouter:
    """Import ``MODULE:ATTR`` (the current directory first on the path).

    Raises:
        CliFailure: the reference is malformed, the module or attribute is
            missing, or the object is not an ``IntentRouter`` (exit 2); the
            module's own code raised while importing (exit 1).
    """
    from ..routing.router import IntentRouter

    module_name, _, attr_path = ref.partition(":")
    if not module_name or not attr_path:
        raise CliFailure(f"--app must be MODULE:ATTR, got {ref!r}", USAGE)
    if os.getcwd() not in sys.path:
        # As `python -m` does: an application next to the caller is importable.
        sys.path.insert(0, os.getcwd())
    try:
        target: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and _names_module(module_name, exc.name):
            raise CliFailure(f"cannot import {module_name!r}: {exc}", USAGE) from exc
        raise _import_failed(module_name, exc) from exc
    except Exception as exc:
        raise _import_failed(module_name, exc) from exc
    for attr in attr_path.split("."):
        try:
            target = getattr(target, attr)
        except AttributeError as exc:
            raise CliFailure(f"{ref!r}: no attribute {attr!r}", USAGE) from exc
    if not isinstance(target, IntentRouter):
        kind = type(target).__name__
        raise CliFailure(f"{ref!r} is a {kind}, not an IntentRouter", USAGE)
    return target


def _import_failed(module_name: str, exc: Exception) -> CliFailure:
    # The module exists but its own code failed: not a usage error.
    message = f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
    return CliFailure(message, 1, cause=exc)


def _names_module(module_name: str, missing: str) -> bool:
    """Whether ``missing`` is ``module_name`` or one of its parent packages."""
    return module_name == missing or module_name.startswith(missing + ".")
