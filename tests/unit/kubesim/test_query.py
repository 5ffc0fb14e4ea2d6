"""Query parameters parsed as the API server parses them (Go's `strconv.ParseBool` for flags)."""

from __future__ import annotations

import pytest

from kubesim import errors
from kubesim.query import flag, integer, parse_bool


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[(v, True) for v in ("1", "t", "T", "TRUE", "true", "True")],
        *[(v, False) for v in ("0", "f", "F", "FALSE", "false", "False", "", None)],
    ],
)
def test_booleans_as_go_parses_them(value: str | None, expected: bool) -> None:
    assert parse_bool(value, "follow") is expected


@pytest.mark.parametrize("value", ["yes", "on", "tRUE", " true", "2"])
def test_a_boolean_go_refuses_is_a_bad_request_naming_the_parameter(value: str) -> None:
    with pytest.raises(errors.StatusError) as caught:
        parse_bool(value, "watch")
    assert caught.value.code == 400
    assert caught.value.message == f'invalid boolean value for watch: "{value}"'


def test_flag_and_integer_read_a_query_mapping() -> None:
    query = {"follow": "True", "tailLines": "20", "limit": ""}
    assert flag(query, "follow") is True
    assert flag(query, "previous") is False
    assert integer(query, "tailLines") == 20
    assert integer(query, "limit") is None
    with pytest.raises(errors.StatusError, match="sinceSeconds: invalid value 'x'"):
        integer({"sinceSeconds": "x"}, "sinceSeconds")
