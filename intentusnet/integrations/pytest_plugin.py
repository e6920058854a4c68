"""The pytest plugin: each test's HTTP calls recorded and replayed in a cassette.

Installed with the package (the ``pytest11`` entry point ``intentusnet``).
A test marked ``@pytest.mark.intentusnet`` (or asking for the
``intentusnet_cassette`` fixture) gets its own cassette, a store under
``<test file's directory>/cassettes/<module>/<test name>/``; every request an
``httpx`` or ``httpx2`` client makes while it runs, whichever client and SDK
built it, sync or async, is answered from the cassette or made and recorded,
as ``--intentusnet-record-mode`` says (docs/pytest.md). The cassette's
directory holds only its record files; its catalog is rebuilt in pytest's
temporary directory.

Options:
    ``--intentusnet-record-mode=once|new_episodes|none|all|rewrite`` (default
    ``none``),
    ``--intentusnet-block-network``, ``--intentusnet-allowed-hosts=HOST,...``.

Fixtures:
    ``intentusnet_cassette`` (the test's :class:`HTTPCassette`),
    ``intentusnet_config`` (options for every cassette in its scope; override
    it), ``intentusnet_cassette_dir`` (where a module's cassettes live).

This module imports only pytest at start-up: a run that uses none of it pays
for nothing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .cassette import HTTPCassette

_MARKER = "intentusnet"
_MODES = ("once", "new_episodes", "none", "all", "rewrite")
#: The modes that may make requests: their tests keep the network.
_RECORDING = ("once", "new_episodes", "all", "rewrite")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the plugin's command-line options."""
    group = parser.getgroup("intentusnet", "IntentusNet HTTP cassettes")
    group.addoption(
        "--intentusnet-record-mode",
        action="store",
        default="none",
        choices=_MODES,
        help=(
            "what cassettes do with HTTP requests: once (record a cassette that "
            "holds nothing yet, else replay), new_episodes (replay, record what "
            "is new), none (replay only; the default), all (record every "
            "request), rewrite (delete the cassette and record it anew)"
        ),
    )
    group.addoption(
        "--intentusnet-block-network",
        action="store_true",
        default=False,
        help=(
            "refuse every network connection during tests, but for tests with a "
            "cassette whose record mode records (once, new_episodes, all, rewrite)"
        ),
    )
    group.addoption(
        "--intentusnet-allowed-hosts",
        action="store",
        default="",
        metavar="HOST,...",
        help="hosts still reachable with --intentusnet-block-network",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker."""
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(record_mode=None, **transport_options): record and replay "
        "this test's httpx and httpx2 requests in its own cassette",
    )


@pytest.fixture
def intentusnet_config() -> dict[str, object]:
    """Cassette options for every test in this fixture's scope (override it).

    The keys are ``record_mode`` and the recording transports' options
    (``ignore_body_paths``, ``before_record_request``, ...); a test's marker
    overrides them. Added in 0.1.0.
    """
    return {}


@pytest.fixture(scope="module")
def intentusnet_cassette_dir(request: pytest.FixtureRequest) -> Path:
    """Where a test module's cassettes live: ``cassettes/<module>`` beside it.

    Added in 0.1.0.
    """
    module = request.path
    return module.parent / "cassettes" / module.stem


@pytest.fixture
def intentusnet_cassette(
    request: pytest.FixtureRequest,
    intentusnet_config: object,
    intentusnet_cassette_dir: str | Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[HTTPCassette]:
    """The test's cassette, recording and replaying its httpx and httpx2 requests.

    Added in 0.1.0.
    """
    from .cassette import HTTPCassette, cassette_name

    options = _options(request, intentusnet_config)
    mode = options.pop("record_mode", None) or request.config.getoption(
        "intentusnet_record_mode"
    )
    name = cassette_name(
        request.node.name, None if request.cls is None else request.cls.__name__
    )
    try:
        cassette = HTTPCassette(
            Path(intentusnet_cassette_dir) / name,
            str(mode),
            cache_dir=tmp_path_factory.mktemp("intentusnet-cache"),
            options=options,
        )
    except ValueError as exc:  # a user's mistake: no traceback
        pytest.fail(f"{request.node.nodeid}: {exc}", pytrace=False)
    with pytest.MonkeyPatch.context() as patch:
        _patch(patch, cassette)
        try:
            yield cassette
        finally:
            cassette.close()


@pytest.fixture(autouse=True)
def _intentusnet(request: pytest.FixtureRequest) -> Iterator[None]:
    """A marked test's cassette, and the network blocked when asked."""
    marked = request.node.get_closest_marker(_MARKER) is not None
    uses = marked or "intentusnet_cassette" in request.fixturenames
    blocking = bool(request.config.getoption("intentusnet_block_network"))
    if not (marked or blocking):
        yield
        return
    mode = None
    if uses:
        # Set up here so the requests of the test's other fixtures go through it.
        cassette: HTTPCassette = request.getfixturevalue("intentusnet_cassette")
        mode = cassette.record_mode.value
    # As pytest-recording does: a cassette that may record needs the network.
    if not blocking or mode in _RECORDING:
        yield
        return
    from .network import block_network

    hosts = str(request.config.getoption("intentusnet_allowed_hosts"))
    with block_network([h for h in (p.strip() for p in hosts.split(",")) if h]):
        yield


def _options(request: pytest.FixtureRequest, config: object) -> dict[str, object]:
    """The test's cassette options: ``intentusnet_config``, then its markers."""
    if not isinstance(config, dict):
        pytest.fail(
            f"intentusnet_config must return a dict, not {type(config).__name__}",
            pytrace=False,
        )
    options = dict(config)
    # The closest marker wins: apply the farthest first.
    for marker in reversed(list(request.node.iter_markers(_MARKER))):
        if marker.args:
            pytest.fail(
                f"{request.node.nodeid}: @pytest.mark.{_MARKER} takes keyword "
                f"options only, not {marker.args!r}",
                pytrace=False,
            )
        options.update(marker.kwargs)
    return options


def _patch(patch: pytest.MonkeyPatch, cassette: HTTPCassette) -> None:
    """Send the transports' requests through the cassette (httpx2 when installed)."""
    import httpx

    libraries = [("httpx", httpx)]
    if importlib.util.find_spec("httpx2") is not None:
        import httpx2

        libraries.append(("httpx2", httpx2))
    for name, library in libraries:
        sync_class = library.HTTPTransport
        async_class = library.AsyncHTTPTransport
        patch.setattr(sync_class, "handle_request", _sync(cassette, name, sync_class))
        patch.setattr(
            async_class,
            "handle_async_request",
            _async(cassette, name, async_class),
        )


def _sync(cassette: HTTPCassette, library: str, cls: type) -> object:
    original = cls.handle_request  # type: ignore[attr-defined]

    def handle_request(self: object, request: object) -> object:
        __tracebackhide__ = True
        return cassette.send(library, original, self, request)

    return handle_request


def _async(cassette: HTTPCassette, library: str, cls: type) -> object:
    original = cls.handle_async_request  # type: ignore[attr-defined]

    async def handle_async_request(self: object, request: object) -> object:
        __tracebackhide__ = True
        return await cassette.asend(library, original, self, request)

    return handle_async_request
