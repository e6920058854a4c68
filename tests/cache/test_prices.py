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


def test_without_a_table_the_published_prices_price_known_models() -> None:
    """No file: genai-prices' published USD prices; a model it lacks is unpriced."""
    from genai_prices import Usage, calc_price

    from intentusnet.cache.prices import price_table

    table = price_table(None)
    assert table is not None
    assert (table.currency, table.published) == ("USD", True)
    expected = calc_price(Usage(input_tokens=1200, output_tokens=300), "gpt-4o-mini")
    assert table.cost("gpt-4o-mini", 1200, 300) == float(expected.total_price)
    assert table.cost("a-model-nobody-publishes", 1200, 300) is None
    assert table.cost(None, 1200, 300) is None


def test_a_usd_table_overrides_and_another_currency_stands_alone(
    tmp_path: Path,
) -> None:
    """USD: the user's prices win, the rest are published; EUR: the user's only."""
    from intentusnet.cache.prices import price_table

    path = tmp_path / "prices.json"
    path.write_text(
        '{"currency": "USD", "models": {"gpt-4o*": {"input": 1, "output": 2}}}'
    )
    usd = price_table(str(path))
    assert usd is not None
    assert usd.cost("gpt-4o-mini", 1_000_000, 1_000_000) == 3.0
    assert usd.cost("claude-3-5-haiku-latest", 1_000_000, 0) is not None
    path.write_text(
        '{"currency": "EUR", "models": {"gpt-4o*": {"input": 1, "output": 2}}}'
    )
    eur = price_table(str(path))
    assert eur is not None
    assert eur.published is False
    assert eur.cost("claude-3-5-haiku-latest", 1_000_000, 0) is None


def test_without_the_package_and_a_table_nothing_is_priced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No genai-prices installed and no file: no table, so costs are not shown."""
    from intentusnet.cache import prices

    monkeypatch.setattr(prices, "_HAVE_PUBLISHED", False)
    assert prices.price_table(None) is None
