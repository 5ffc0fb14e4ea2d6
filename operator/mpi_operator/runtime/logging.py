"""Process logging for `mpi-operator run`: text or JSON lines, each naming the MPIJob being
reconciled.

The key lives in a contextvar (`reconcile_key`) that the workers set around each reconcile
(`key_context`). asyncio copies the context into every task created inside it, so API calls, retries
and child tasks of that reconcile log under the same key. `KeyFilter`, installed on the handler
rather than on a logger, stamps `record.key` onto every record that reaches the handler, from any
logger.

JSON lines carry `ts` (RFC 3339, UTC, milliseconds), `level`, `logger`, `msg`, `key` (null outside a
reconcile), any `extra={...}` fields, and `exc` with the traceback when there is one.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

import orjson

LogFormat = Literal["json", "text"]

reconcile_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "reconcile_key", default=None
)
"""The "namespace/name" of the MPIJob the current task is reconciling, if any."""

# Attributes every LogRecord has; anything else on a record came from `extra=` and is logged too.
_STANDARD_ATTRS = frozenset(
    {
        *logging.LogRecord("", 0, "", 0, "", None, None).__dict__,
        "message",
        "asctime",
        "key",
        "taskName",
    }
)
_HANDLER_NAME = "mpi-operator"
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


@contextlib.contextmanager
def key_context(key: str) -> Iterator[None]:
    """Every log line emitted inside (in this task and tasks it starts) names `key`."""
    token = reconcile_key.set(key)
    try:
        yield
    finally:
        reconcile_key.reset(token)


class KeyFilter(logging.Filter):
    """Stamps the current reconcile key on each record (never filters anything out)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "key"):
            record.key = reconcile_key.get()
        return True


def _timestamp(record: logging.LogRecord) -> str:
    return (
        datetime.fromtimestamp(record.created, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    fields = record.__dict__
    if (
        fields.keys() <= _STANDARD_ATTRS
    ):  # most records: a set operation instead of a loop in Python
        return {}
    return {k: v for k, v in fields.items() if k not in _STANDARD_ATTRS and not k.startswith("_")}


def _json_line(entry: dict[str, Any]) -> str:
    """`json.dumps(entry, default=str, ensure_ascii=False)`, by orjson (a line per write in a
    fan-in).

    Datetimes and dataclasses pass through to `str` as with json (enums are written as their values,
    NaN as null); what orjson refuses (integers past 64 bits, keys that are not strings) is left to
    json."""
    try:
        return orjson.dumps(entry, default=str, option=_ORJSON_OPTIONS).decode()
    except TypeError:
        return json.dumps(entry, default=str, ensure_ascii=False)


class JsonFormatter(logging.Formatter):
    """One JSON object per line; values json cannot encode are written as their `str()`."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "key": getattr(record, "key", None),
        }
        for name, value in _extras(record).items():
            entry.setdefault(name, value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return _json_line(entry)


class TextFormatter(logging.Formatter):
    """`<ts> <LEVEL> <logger> [<key>] <msg> k=v ...`; the key part is omitted outside a
    reconcile."""

    def format(self, record: logging.LogRecord) -> str:
        key = getattr(record, "key", None)
        parts = [_timestamp(record), f"{record.levelname:<7}", record.name]
        if key:
            parts.append(f"[{key}]")
        parts.append(record.getMessage())
        parts.extend(f"{name}={value!r}" for name, value in _extras(record).items())
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:
            line += "\n" + record.exc_text
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


def make_handler(log_format: LogFormat, stream: TextIO | None = None) -> logging.Handler:
    """A stream handler (stderr by default) with the key filter and the chosen formatter."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(KeyFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    return handler


def setup(
    log_format: LogFormat = "text", *, level: int = logging.INFO, stream: TextIO | None = None
) -> None:
    """Configures the root logger for the operator process; calling it again replaces our
    handler."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    root.addHandler(make_handler(log_format, stream))
    root.setLevel(level)
