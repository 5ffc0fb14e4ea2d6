"""Label and field selectors as the apiserver parses and matches them.

The label-selector lexer and parser follow apimachinery's `labels/selector.go` token by token, so
the same texts are accepted and the same error messages come back (`unable to parse requirement:
...`, `found 'x', expected: ...`). Field selectors follow `fields/selector.go` (`=`, `==`, `!=`,
backslash escapes) and the per-kind field label sets the apiserver's registries expose (`field label
not supported: x`).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.names import is_qualified_name, is_valid_label_value


class SelectorError(ValueError):
    """The selector text is malformed or names an unsupported field (the server answers 400)."""


class _Tok(enum.Enum):
    ERROR = 0
    END = 1
    CLOSE_PAR = 2
    COMMA = 3
    NOT = 4
    DOUBLE_EQUALS = 5
    EQUALS = 6
    GREATER = 7
    IDENT = 8
    IN = 9
    LESS = 10
    NOT_EQUALS = 11
    NOT_IN = 12
    OPEN_PAR = 13


_SYMBOLS = {
    ")": _Tok.CLOSE_PAR,
    ",": _Tok.COMMA,
    "!": _Tok.NOT,
    "==": _Tok.DOUBLE_EQUALS,
    "=": _Tok.EQUALS,
    ">": _Tok.GREATER,
    "<": _Tok.LESS,
    "!=": _Tok.NOT_EQUALS,
    "(": _Tok.OPEN_PAR,
}
_SPECIAL_CHARS = frozenset("=!(),><")
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


def _lex(text: str) -> list[tuple[_Tok, str]]:
    out: list[tuple[_Tok, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            out.append((_Tok.END, ""))
            return out
        ch = text[i]
        if ch in _SPECIAL_CHARS:
            two = text[i : i + 2]
            if two in _SYMBOLS:
                out.append((_SYMBOLS[two], two))
                i += 2
            else:
                out.append((_SYMBOLS[ch], ch))
                i += 1
            continue
        start = i
        while i < n and text[i] not in _SPECIAL_CHARS and text[i] not in " \t\r\n":
            i += 1
        word = text[start:i]
        out.append(({"in": _Tok.IN, "notin": _Tok.NOT_IN}.get(word, _Tok.IDENT), word))


class Operator(enum.StrEnum):
    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        if self.key not in labels:
            return False
        try:
            actual = int(labels[self.key])
        except ValueError:
            return False
        bound = int(next(iter(self.values)))
        return actual > bound if op is Operator.GREATER_THAN else actual < bound


def _go_quote_list(values: list[str]) -> str:
    """field.Invalid renders a []string value as JSON (apimachinery >= 1.31)."""
    return json.dumps(values, separators=(",", ":"))


def _new_requirement(key: str, op: Operator, values: list[str]) -> Requirement:
    """labels.NewRequirement: the checks and messages apimachinery applies to a parsed
    requirement."""
    if errs := is_qualified_name(key):
        raise SelectorError(f'key: Invalid value: "{key}": ' + "; ".join(errs))
    bad = f"values: Invalid value: {_go_quote_list(values)}: "
    if op in (Operator.IN, Operator.NOT_IN) and not values:
        raise SelectorError(bad + "for 'in', 'notin' operators, values set can't be empty")
    if op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS) and len(values) != 1:
        raise SelectorError(bad + "exact-match compatibility requires one single value")
    if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        if len(values) != 1:
            raise SelectorError(bad + "for 'Gt', 'Lt' operators, exactly one value is required")
        try:
            int(values[0])
        except ValueError:
            raise SelectorError(
                bad + "for 'Gt', 'Lt' operators, the value must be an integer"
            ) from None
    for i, v in enumerate(values):
        if errs := is_valid_label_value(v):
            raise SelectorError(f'values[{i}][{key}]: Invalid value: "{v}": ' + "; ".join(errs))
    return Requirement(key, op, frozenset(values))


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def _peek(self, values: bool = True) -> tuple[_Tok, str]:
        tok, lit = self.tokens[self.pos]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENT
        return tok, lit

    def _next(self, values: bool = True) -> tuple[_Tok, str]:
        tok, lit = self._peek(values)
        if self.pos < len(self.tokens) - 1:
            self.pos += 1
        return tok, lit

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self._peek()
            if tok in (_Tok.IDENT, _Tok.NOT):
                try:
                    reqs.append(self._requirement())
                except SelectorError as e:
                    raise SelectorError(f"unable to parse requirement: {e}") from None
                tok, lit = self._next()
                if tok is _Tok.END:
                    return reqs
                if tok is _Tok.COMMA:
                    tok2, lit2 = self._peek()
                    if tok2 not in (_Tok.IDENT, _Tok.NOT):
                        raise SelectorError(f"found '{lit2}', expected: identifier after ','")
                    continue
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            if tok is _Tok.END:
                return reqs
            raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> Requirement:
        op: Operator | None = None
        tok, lit = self._next()
        if tok is _Tok.NOT:
            op = Operator.DOES_NOT_EXIST
            tok, lit = self._next()
        if tok is not _Tok.IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        if errs := is_qualified_name(lit):
            raise SelectorError(f'<nil>: Invalid value: "{lit}": ' + "; ".join(errs))
        key = lit
        if op is Operator.DOES_NOT_EXIST or self._peek()[0] in (_Tok.END, _Tok.COMMA):
            # `!key=v` is not an error here: the caller then trips over the `=` (upstream order)
            return _new_requirement(key, op or Operator.EXISTS, [])
        tok, lit = self._next(values=False)
        ops = {
            _Tok.IN: Operator.IN,
            _Tok.NOT_IN: Operator.NOT_IN,
            _Tok.EQUALS: Operator.EQUALS,
            _Tok.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
            _Tok.NOT_EQUALS: Operator.NOT_EQUALS,
            _Tok.GREATER: Operator.GREATER_THAN,
            _Tok.LESS: Operator.LESS_THAN,
        }
        if tok not in ops:
            raise SelectorError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        op = ops[tok]
        values = self._set_values() if op in (Operator.IN, Operator.NOT_IN) else self._exact_value()
        return _new_requirement(key, op, sorted(values))

    def _set_values(self) -> set[str]:
        tok, lit = self._next()
        if tok is not _Tok.OPEN_PAR:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self._peek()
        if tok in (_Tok.IDENT, _Tok.COMMA):
            values = self._identifiers()
            tok, _ = self._next()
            if tok is not _Tok.CLOSE_PAR:
                raise SelectorError(f"found '{lit}', expected: ')'")
            return values
        if tok is _Tok.CLOSE_PAR:
            self._next()
            return {""}
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def _identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self._next()
            if tok is _Tok.IDENT:
                values.add(lit)
                tok2, lit2 = self._peek()
                if tok2 is _Tok.COMMA:
                    continue
                if tok2 is _Tok.CLOSE_PAR:
                    return values
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok is _Tok.COMMA:
                if not values:
                    values.add("")
                tok2, _ = self._peek()
                if tok2 is _Tok.CLOSE_PAR:
                    values.add("")
                    return values
                if tok2 is _Tok.COMMA:
                    self._next()
                    values.add("")
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        tok, _ = self._peek()
        if tok in (_Tok.END, _Tok.COMMA):
            return {""}
        tok, lit = self._next()
        if tok is _Tok.IDENT:
            return {lit}
        raise SelectorError(f"found '{lit}', expected: identifier")


@dataclass(frozen=True)
class LabelSelector:
    text: str
    requirements: tuple[Requirement, ...] = dataclasses.field(default=(), compare=False)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def parse_label_selector(text: str) -> LabelSelector:
    return LabelSelector(text, tuple(_Parser(text).parse()))


# ---------------------------------------------------------------- field selectors

FieldGetter = Callable[[Mapping[str, Any]], str]


def _path(*keys: str) -> FieldGetter:
    def get(obj: Mapping[str, Any]) -> str:
        cur: Any = obj
        for k in keys:
            if not isinstance(cur, Mapping):
                return ""
            cur = cur.get(k)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


def _pod_ip(obj: Mapping[str, Any]) -> str:
    status = obj.get("status") or {}
    ips = status.get("podIPs") or []
    if ips and isinstance(ips[0], Mapping):
        return str(ips[0].get("ip") or "")
    return str(status.get("podIP") or "")


def _event_fields(prefix: str, ref: str) -> dict[str, FieldGetter]:
    return {f"{prefix}.{k}": _path(ref, k) for k in _OBJECT_REF_FIELDS}


_OBJECT_REF_FIELDS = (
    "kind",
    "namespace",
    "name",
    "uid",
    "apiVersion",
    "resourceVersion",
    "fieldPath",
)

# Per kind: the field labels its registry's GetAttrs / field label conversion accepts beyond
# metadata.*.
_KIND_FIELDS: dict[str, dict[str, FieldGetter]] = {
    "Pod": {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: (
            "true" if (o.get("spec") or {}).get("hostNetwork") else "false"
        ),
        "status.phase": _path("status", "phase"),
        "status.podIP": _pod_ip,
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "Event": {
        **_event_fields("involvedObject", "involvedObject"),
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "Secret": {"type": _path("type")},
    "Job": {"status.successful": lambda o: str((o.get("status") or {}).get("successful") or 0)},
    "Namespace": {"status.phase": _path("status", "phase")},
    "Node": {
        "spec.unschedulable": lambda o: (
            "true" if (o.get("spec") or {}).get("unschedulable") else "false"
        )
    },
    "ReplicaSet": {"status.replicas": lambda o: str((o.get("status") or {}).get("replicas") or 0)},
}
_COMMON_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}


def _event_getter(name: str) -> FieldGetter:
    """events.k8s.io/v1 objects use `regarding`/`note`/`deprecatedSource`; core field labels still
    apply."""
    legacy = _KIND_FIELDS["Event"][name]
    renamed = {"involvedObject": "regarding", "source": "deprecatedSource"}

    def get(obj: Mapping[str, Any]) -> str:
        if "involvedObject" in obj or ("regarding" not in obj and "deprecatedSource" not in obj):
            return legacy(obj)
        head, _, rest = name.partition(".")
        if head in renamed:
            return _path(renamed[head], rest or "component")(obj)
        return _path("reportingController" if name == "reportingComponent" else name)(obj)

    return get


def _split_terms(text: str) -> list[str]:
    terms, cur, escaped = [], [], False
    for ch in text:
        if escaped:
            cur.append(ch)
            escaped = False
        elif ch == "\\":
            cur.append(ch)
            escaped = True
        elif ch == ",":
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """fields.splitTerm: the first unescaped operator wins, trying `!=`, `==`, `=` at each
    position."""
    escaped = False
    for i, ch in enumerate(term):
        if escaped:
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    out, escaped = [], False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped {ch} in value {value!r}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: unterminated escape sequence")
    return "".join(out)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    operator: str
    value: str
    getter: FieldGetter = dataclasses.field(compare=False, repr=False)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        actual = self.getter(obj)
        return actual != self.value if self.operator == "!=" else actual == self.value


@dataclass(frozen=True)
class FieldSelector:
    text: str
    requirements: tuple[FieldRequirement, ...] = dataclasses.field(default=(), compare=False)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def supported_fields(kind: str) -> list[str]:
    return [*_COMMON_FIELDS, *_KIND_FIELDS.get(kind, {})]


def parse_field_selector(text: str, *, kind: str) -> FieldSelector:
    reqs: list[FieldRequirement] = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        name, op, raw = split
        value = _unescape(raw)
        getter = _COMMON_FIELDS.get(name)
        if getter is None and name in _KIND_FIELDS.get(kind, {}):
            getter = _event_getter(name) if kind == "Event" else _KIND_FIELDS[kind][name]
        if getter is None:
            raise SelectorError(f"field label not supported: {name}")
        reqs.append(FieldRequirement(name, "!=" if op == "!=" else "=", value, getter))
    return FieldSelector(text, tuple(reqs))
