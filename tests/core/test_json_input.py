"""The JSON input sanitiser: depth refused by a linear scan before parsing, NUL
characters and non-finite numbers by JSON path."""

from __future__ import annotations

import pytest

from simulations.core.json_fields import (
    MAX_JSON_DEPTH,
    JsonInputError,
    json_depth_error,
    loads,
    storable_problems,
)


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_nesting_up_to_the_limit_is_accepted_and_one_more_level_is_not() -> None:
    assert json_depth_error(nested(MAX_JSON_DEPTH)) is None
    assert loads(nested(MAX_JSON_DEPTH)) is not None
    message = json_depth_error(nested(MAX_JSON_DEPTH + 1))
    assert message is not None and f"deeper than {MAX_JSON_DEPTH}" in message


def test_a_hundred_thousand_levels_are_refused_before_parsing() -> None:
    with pytest.raises(JsonInputError) as caught:
        loads('{"a": ' + nested(100_000) + "}", path="config")
    assert "nested deeper" in caught.value.problems["config"][0]


def test_brackets_in_strings_and_escaped_quotes_are_not_structure() -> None:
    text = '{"a": "[[[[\\"{{{{", "b": ["x\\\\", "]]]"]}'
    assert json_depth_error(text.replace("[[[[", "[" * 500)) is None
    assert loads(text) == {"a": '[[[["{{{{', "b": ["x\\", "]]]"]}


def test_an_unterminated_string_is_left_to_the_parser() -> None:
    assert json_depth_error('{"a": "[[[[[') is None
    with pytest.raises(JsonInputError, match="not valid JSON"):
        loads('{"a": "[[[[[')


def test_problems_are_keyed_by_json_path() -> None:
    value = {"a": [1, float("inf"), {"b": "x\x00", "c\x00": 1}], "d": float("nan")}
    assert set(storable_problems(value, "document")) == {
        "document.a[1]",
        "document.a[2].b",
        "document.a[2]",
        "document.d",
    }
    with pytest.raises(JsonInputError) as caught:
        loads('{"x": [0, 1e400, -Infinity, NaN]}')
    assert set(caught.value.problems) == {"x[1]", "x[2]", "x[3]"}


def test_a_deep_python_value_is_reported_without_recursion() -> None:
    value: list = []
    for _ in range(10_000):
        value = [value]
    assert "nested deeper" in storable_problems(value, "v")["v" + "[0]" * MAX_JSON_DEPTH][0]
