"""Price tables: loading JSON and TOML, matching models, precise errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from intentusnet import ModelPrice, PriceTable, PriceTableError

GOOD = {
    "currency": "USD",
    "models": {
        "gpt-4o": {"input": 2.5, "output": 10},
        "gpt-4o*": {"input": 99, "output": 99},
        "gpt-4o-mini*": {"input": 0.15, "output": 0.6},
        "claude-*": {"input": 3, "output": 15},
    },
}


def test_load_json_and_toml(tmp_path: Path) -> None:
    """A JSON file and a .toml file give the same table."""
    json_file = tmp_path / "prices.json"
    json_file.write_text(
        '{"currency": "EUR", "models": {"m": {"input": 1, "output": 2.5}}}'
    )
    toml_file = tmp_path / "prices.toml"
    toml_file.write_text('currency = "EUR"\n[models.m]\ninput = 1\noutput = 2.5\n')
    for path in (json_file, toml_file):
        table = PriceTable.load(path)
        assert table.currency == "EUR"
        assert table.models == {"m": ModelPrice(1.0, 2.5)}


def test_exact_name_then_longest_prefix() -> None:
    """An exact name wins; otherwise the longest ``prefix*`` the model starts with."""
    table = PriceTable.from_json(GOOD)
    assert table.price_of("gpt-4o") == ModelPrice(2.5, 10.0)
    assert table.price_of("gpt-4o-2024-08-06") == ModelPrice(99.0, 99.0)
    assert table.price_of("gpt-4o-mini-2024-07-18") == ModelPrice(0.15, 0.6)
    assert table.price_of("claude-3-5-haiku-latest") == ModelPrice(3.0, 15.0)
    assert table.price_of("llama") is None
    assert table.price_of(None) is None
    assert table.cost("gpt-4o", 1_000_000, 500_000) == pytest.approx(7.5)
    assert table.cost("llama", 10, 10) is None


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "must be an object with currency, models"),
        ({"currency": "USD"}, "models: must be an object"),
        ({"models": {}}, "currency: must be a non-empty text, not None"),
        ({"currency": " ", "models": {}}, "currency: must be a non-empty text"),
        (
            {"currency": "USD", "models": {}, "extra": 1},
            "unknown field 'extra'; the fields are currency, models",
        ),
        (
            {"currency": "USD", "models": {"m": 3}},
            "models['m']: must be an object with input, output",
        ),
        (
            {"currency": "USD", "models": {"m": {"input": 1}}},
            "models['m'].output: missing",
        ),
        (
            {"currency": "USD", "models": {"m": {"input": "1", "output": 1}}},
            "models['m'].input: must be a number >= 0, not '1'",
        ),
        (
            {"currency": "USD", "models": {"m": {"input": -1, "output": 1}}},
            "models['m'].input: must be a number >= 0, not -1",
        ),
        (
            {"currency": "USD", "models": {"m": {"input": True, "output": 1}}},
            "models['m'].input: must be a number >= 0, not True",
        ),
        (
            {"currency": "USD", "models": {"m": {"input": 1, "output": 1, "x": 0}}},
            "models['m'].x: unknown field; the fields are input, output",
        ),
        (
            {"currency": "USD", "models": {"g*pt": {"input": 1, "output": 1}}},
            "models['g*pt']: a model name, or a prefix ending in '*'",
        ),
    ],
)
def test_bad_documents_name_the_field(document: object, message: str) -> None:
    """Every wrong field is refused with its path (model and field)."""
    with pytest.raises(PriceTableError) as caught:
        PriceTable.from_json(document, "prices.json")
    assert str(caught.value).startswith("prices.json: ")
    assert message in str(caught.value)
    assert caught.value.exit_code == 2


def test_bad_files_name_the_file(tmp_path: Path) -> None:
    """A missing file, bad JSON, bad TOML and non-UTF-8 text name the file."""
    missing = tmp_path / "none.json"
    with pytest.raises(PriceTableError, match=r"none\.json: cannot read: No such file"):
        PriceTable.load(missing)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{nope")
    with pytest.raises(PriceTableError, match=r"bad\.json: not valid JSON"):
        PriceTable.load(bad_json)
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("currency = ")
    with pytest.raises(PriceTableError, match=r"bad\.toml: not valid TOML"):
        PriceTable.load(bad_toml)
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'currency = "\xe9"')
    with pytest.raises(PriceTableError, match=r"latin\.toml: not UTF-8 text"):
        PriceTable.load(latin)
