"""Query parameters as the API server parses them: one parser per type, for every endpoint (the
API, pod logs, the process runtime's logs). Booleans follow Go's `strconv.ParseBool`, so
`follow=True` (the official Python client) and `watch=1` mean what they mean on a real cluster."""

from __future__ import annotations

from collections.abc import Mapping

from kubesim import errors

TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(value: str | None, param: str) -> bool:
    """`strconv.ParseBool`; absent or empty is false, anything else not listed is a 400."""
    if value is None or value == "":
        return False
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise errors.bad_request(f'invalid boolean value for {param}: "{value}"')


def flag(query: Mapping[str, str], name: str) -> bool:
    return parse_bool(query.get(name), name)


def integer(query: Mapping[str, str], name: str) -> int | None:
    """A whole number, None when absent or empty, a 400 naming the parameter otherwise."""
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise errors.bad_request(f"{name}: invalid value {value!r}") from exc
