"""The one credential rule: names, patterns, exceptions, configuration."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from intentusnet import FileExecutionStore
from intentusnet.integrations.credentials import (
    CREDENTIAL_NAMES,
    CREDENTIAL_PATTERNS,
    DEFAULT_RULE,
    NOT_CREDENTIALS,
    CredentialRule,
    normal_name,
)
from intentusnet.integrations.httpx import RecordingTransport

#: For each pattern, names it matches (the issue's positions among them).
MATCHED = {
    "*token*": ["token", "id_token", "private_token", "X-Auth-Token", "tokenized"],
    "*secret*": ["secret", "client_secret", "X-Shared-Secret"],
    "*signature*": ["signature", "X-Goog-Signature", "x-amz-signature"],
    "*password*": ["password", "db_password", "PasswordHash"],
    "*assertion*": ["client_assertion", "assertion"],
    "*credential*": ["X-Amz-Credential", "credentials"],
    "auth*": ["auth", "Authorization", "auth_code", "AUTHN"],
    "*key*": ["key", "api_key", "x-api-key", "x-goog-api-key", "Ocp-Apim-Key"],
}
#: For each exception, names it keeps out although a pattern matches them.
EXCEPTED = {
    "*ratelimit*": ["x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit"],
    "*tokens": ["max_tokens", "max-completion-tokens"],
    "page_token": ["page_token", "pageToken"],
    "next_page_token": ["nextPageToken"],
    "idempotency-key": ["Idempotency-Key"],
    "x-idempotency-key": ["X-Idempotency-Key"],
    "keyword*": ["keyword", "keywords"],
}
#: Names no entry matches: ordinary headers and parameters.
ORDINARY = [
    "content-type",
    "accept",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "user-agent",
    "x-stainless-retry-count",
    "keep-alive",
    "www-authenticate",
    "q",
    "model",
]


def test_the_tables_name_every_entry() -> None:
    """The test tables cover every pattern and exception the rule holds."""
    assert set(MATCHED) == set(CREDENTIAL_PATTERNS)
    assert set(EXCEPTED) == set(NOT_CREDENTIALS)


@pytest.mark.parametrize(
    "name", [name for names in MATCHED.values() for name in names] + [*CREDENTIAL_NAMES]
)
def test_credential_names_and_patterns_match(name: str) -> None:
    """Each well-known name and each pattern's examples carry a credential."""
    assert DEFAULT_RULE(name)


@pytest.mark.parametrize(
    "name", [name for names in EXCEPTED.values() for name in names] + ORDINARY
)
def test_exceptions_and_ordinary_names_do_not(name: str) -> None:
    """Counts, rate limits, page tokens, idempotency keys, plain names: none."""
    assert not DEFAULT_RULE(name)


@given(
    st.sampled_from(
        [*CREDENTIAL_NAMES, *ORDINARY, *(n for v in MATCHED.values() for n in v)]
    ),
    st.lists(st.sampled_from(["-", "_", ".", " ", ""]), min_size=40, max_size=40),
    st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_case_and_separators_do_not_matter(
    name: str, separators: list[str], upper: list[bool]
) -> None:
    """A name respelled with other case and separators is decided alike."""
    letters = [c for c in name if c.isalnum()]
    spelled = "".join(
        (c.upper() if up else c.lower()) + sep
        for c, up, sep in zip(letters, upper, separators, strict=False)
    )
    assert normal_name(spelled) == normal_name(name)
    assert DEFAULT_RULE(spelled) == DEFAULT_RULE(name)


def test_configuration_adds_and_takes_away() -> None:
    """``more`` adds names and patterns over the exceptions; ``less`` wins over all."""
    rule = CredentialRule(
        more=["x-org", "*session*", "max_tokens"], less=["code", "*key*"]
    )
    assert [rule(n) for n in ("X-Org", "my_session_id", "max-tokens")] == [True] * 3
    assert [rule(n) for n in ("code", "x-api-key")] == [False, False]
    assert [rule(n) for n in ("authorization", "cookie")] == [True, True]
    assert [DEFAULT_RULE(n) for n in ("code", "x-org")] == [True, False]


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        (["a*b"], ValueError),
        (["*"], ValueError),
        (["--"], ValueError),
        ("x-org", TypeError),
        ([b"x-org"], TypeError),
    ],
)
def test_malformed_entries_are_refused(entries: object, error: type) -> None:
    """A star inside, an empty name, a single string or bytes: refused at once."""
    with pytest.raises(error):
        CredentialRule(more=entries)  # type: ignore[arg-type]
    with pytest.raises(error):
        CredentialRule(less=entries)  # type: ignore[arg-type]


def _url_recorded(store: FileExecutionStore, url: str, **options: object) -> str:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"ok": True})

    transport = RecordingTransport(
        store,
        wrapped=httpx.MockTransport(answer),
        **options,  # type: ignore[arg-type]
    )
    with httpx.Client(transport=transport) as http:
        http.get(url)
    (summary,) = store.list()
    recorded = store.load(summary.execution_id).envelope["payload"]["url"]
    assert isinstance(recorded, str)
    return recorded


def test_transports_follow_the_rule_they_are_given(tmp_path: Path) -> None:
    """The default rule, one with ``less``, and ``secret_params`` adding to it."""
    url = "https://api.example/v1?code=FR&X-Goog-Signature=s1g&org=acme&q=1"
    default = _url_recorded(FileExecutionStore(tmp_path / "a"), url)
    country = _url_recorded(
        FileExecutionStore(tmp_path / "b"),
        url,
        credentials=CredentialRule(less=["code"]),
    )
    org = _url_recorded(FileExecutionStore(tmp_path / "c"), url, secret_params=["org"])
    assert default == "https://api.example/v1?org=acme&q=1"
    assert country == "https://api.example/v1?code=FR&org=acme&q=1"
    assert org == "https://api.example/v1?q=1"
