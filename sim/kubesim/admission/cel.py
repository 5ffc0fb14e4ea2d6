"""`x-kubernetes-validations` (CEL) rules of CRD schemas, evaluated with cel-python (`celpy`).

`self` is the node's value (converted to CEL types by the node's schema: `number` stays a double,
integers stay ints), `oldSelf` the correlated old value on UPDATE; rules that mention `oldSelf` are
transition rules and are skipped when there is no old value (CREATE, or a list item that did not
exist before). A failing rule becomes a field error shaped by its `reason` (`spec: Invalid value:
"object": <message>`). cel-python lacks some of Kubernetes' CEL extensions (optional types `?.`,
`isSorted`, `quantity`, `url`, `format`...): a rule it cannot parse or whose function it does not
know is reported as a warning and skipped, never as a refusal.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import celpy
import orjson
from celpy import celtypes
from celpy.adapter import json_to_cel

from kubesim.admission.fielderrors import Cause, go_quote
from kubesim.admission.schema import MISSING, Node
from kubesim.admission.structural import CelSite

_OLD_SELF = re.compile(r"\boldSelf\b")
_UNSUPPORTED = re.compile(
    r"undeclared reference to|no such overload|no matching overload|CELParseError|unsupported"
)
_NO_SUCH_MEMBER = re.compile(r"no such member in mapping: '([^']*)'")
_ENV = celpy.Environment()


class CelUnsupported(Exception):
    """cel-python cannot compile or run this rule (a gap of the library, not a verdict on the
    object)."""


@dataclass(frozen=True)
class CelOutcome:
    causes: list[Cause]
    warnings: list[str]


@lru_cache(maxsize=1024)
def compile_rule(rule: str) -> Any:
    """A runnable program for `rule`; raises CelUnsupported when cel-python cannot parse it."""
    try:
        return _ENV.program(_ENV.compile(rule))
    except Exception as e:  # celpy raises parse errors of several types
        raise CelUnsupported(
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else e}"
        ) from None


def to_cel(value: Any, node: Node | None) -> Any:
    """JSON -> CEL values, typed by the schema (an integral JSON number in a `number` field is a
    double)."""
    if (
        node is not None
        and "number" in node.types
        and isinstance(value, int)
        and not isinstance(value, bool)
    ):
        return celtypes.DoubleType(value)
    if isinstance(value, dict):
        return celtypes.MapType(
            {
                celtypes.StringType(k): to_cel(v, node.child(k) if node else None)
                for k, v in value.items()
            }
        )
    if isinstance(value, list):
        items = node.items if node is not None else None
        return celtypes.ListType([to_cel(v, items) for v in value])
    return json_to_cel(value)


def _run(rule: str, activation: dict[str, Any]) -> Any:
    program = compile_rule(rule)
    try:
        result = program.evaluate(activation)
    except Exception as e:  # evaluation errors come as CELEvalError, TypeError, KeyError...
        return e
    return result


def _is_unsupported(error: Exception) -> bool:
    return bool(_UNSUPPORTED.search(str(error.args[0] if error.args else error)))


def _type_name(node: Node) -> str:
    return next(iter(sorted(node.types)), "")


def _cause(path: str, reason: str, message: str, node: Node) -> Cause:
    if reason == "FieldValueRequired":
        return Cause(path, f"Required value: {message}", reason)
    if reason == "FieldValueForbidden":
        return Cause(path, f"Forbidden: {message}", reason)
    if reason == "FieldValueDuplicate":
        return Cause(path, f"Duplicate value: {go_quote(message)}", reason)
    return Cause(
        path, f"Invalid value: {go_quote(_type_name(node))}: {message}", "FieldValueInvalid"
    )


def _field_path(base: str, relative: str) -> str:
    if not relative:
        return base
    rel = re.sub(r"\['([^']*)'\]", r".\1", relative)
    return f"{base}{rel}" if base else rel.lstrip(".")


# Verdicts by (rule spec, value, old value): an object re-admitted with the same content (status
# writes, no-op updates) skips cel-python's tree-walking interpreter, which costs milliseconds per
# rule.
_Verdict = tuple[str, str]  # ("ok" | "fail" | "error" | "warn", text)
_VERDICTS: OrderedDict[tuple[bytes, bytes, bytes], _Verdict] = OrderedDict()
_VERDICT_LIMIT = 4096


def _canonical(value: Any) -> bytes:
    """JSON with sorted keys: equal values, equal keys (orjson, as the verdict's cache key is built
    on every write of a custom resource; the standard library for what orjson refuses, e.g. huge
    integers). orjson writes NaN as null: NaN is not JSON, and an apiserver refuses a body holding
    it."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return b"~" + json.dumps(value, sort_keys=True).encode()


def _verdict(rule_spec: dict[str, Any], site: CelSite, transition: bool) -> _Verdict:
    scope = _scope(str(rule_spec.get("rule", "")), str(rule_spec.get("messageExpression") or ""))
    site = replace(site, value=_project(site.value, scope[0]), old=_project(site.old, scope[1]))
    key = (
        _canonical(rule_spec),
        _canonical(site.value),
        _canonical(site.old) if transition else b"",
    )
    hit = _VERDICTS.get(key)
    if hit is not None:
        _VERDICTS.move_to_end(key)
        return hit
    verdict = _judge(rule_spec, site, transition)
    _VERDICTS[key] = verdict
    if len(_VERDICTS) > _VERDICT_LIMIT:
        _VERDICTS.popitem(last=False)
    return verdict


# `self.a.b`, `oldSelf.c`, `has(self.d)`, `self.e.all(...)`: the fields a rule reads, so its verdict
# depends on those parts only (a root rule reading `self.metadata.name` is not re-run on each status
# write).
_REFERENCE = re.compile(r"\b(self|oldSelf)\b((?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)(\s*\()?")
Paths = tuple[tuple[str, ...], ...] | None
"""Field paths read under `self` (or `oldSelf`); None: the whole value."""


@lru_cache(maxsize=1024)
def _scope(rule: str, message_expression: str) -> tuple[Paths, Paths]:
    """The paths the rule (and its messageExpression) read under `self` and under `oldSelf`."""
    found: dict[str, list[tuple[str, ...]]] = {"self": [], "oldSelf": []}
    for match in _REFERENCE.finditer(f"{rule}\n{message_expression}"):
        chain = tuple(part.strip() for part in match.group(2).split(".")[1:])
        if match.group(3) is not None:
            chain = chain[:-1]  # `self.x.matches(`: the last name is a method
        found[match.group(1)].append(chain)

    def paths(chains: list[tuple[str, ...]]) -> Paths:
        return None if any(not c for c in chains) else tuple(chains)

    return paths(found["self"]), paths(found["oldSelf"])


def _project(value: Any, paths: Paths) -> Any:
    """`value` cut down to `paths` (absent fields stay absent, so `has()` answers the same)."""
    if paths is None or not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for head in dict.fromkeys(p[0] for p in paths):
        if head not in value:
            continue
        rests = [p[1:] for p in paths if p[0] == head]
        out[head] = (
            value[head] if any(not r for r in rests) else _project(value[head], tuple(rests))
        )
    return out


def _judge(rule_spec: dict[str, Any], site: CelSite, transition: bool) -> _Verdict:
    rule = str(rule_spec.get("rule", ""))
    activation = {"self": to_cel(site.value, site.node)}
    if transition:
        activation["oldSelf"] = to_cel(site.old, site.node)
    try:
        result = _run(rule, activation)
    except CelUnsupported as e:
        return ("warn", f"was not evaluated: {e}")
    if isinstance(result, Exception):
        if _is_unsupported(result):
            return ("warn", f"was not evaluated: {result}")
        detail = _NO_SUCH_MEMBER.sub(
            r"no such key: \1", str(result.args[0] if result.args else result)
        )
        return ("error", f"{detail} evaluating rule: {rule}")
    if result is True or (isinstance(result, celtypes.BoolType) and bool(result)):
        return ("ok", "")
    if not isinstance(result, bool | celtypes.BoolType):
        return ("warn", "did not return a bool")
    return ("fail", _message(rule_spec, activation, rule))


def evaluate(sites: list[CelSite]) -> CelOutcome:
    causes: list[Cause] = []
    warnings: list[str] = []
    for site in sites:
        for rule_spec in site.node.validations:
            rule = str(rule_spec.get("rule", ""))
            transition = bool(_OLD_SELF.search(rule))
            if transition and site.old is MISSING:
                continue
            kind, text = _verdict(rule_spec, site, transition)
            if kind == "warn":
                warnings.append(
                    f"{site.path or '<root>'}: x-kubernetes-validations rule {rule!r} {text}"
                )
            elif kind == "error":
                causes.append(_cause(site.path, "FieldValueInvalid", text, site.node))
            elif kind == "fail":
                path = _field_path(site.path, str(rule_spec.get("fieldPath", "")))
                causes.append(
                    _cause(path, str(rule_spec.get("reason", "FieldValueInvalid")), text, site.node)
                )
    return CelOutcome(causes, warnings)


def _message(rule_spec: dict[str, Any], activation: dict[str, Any], rule: str) -> str:
    expression = rule_spec.get("messageExpression")
    if expression:
        try:
            result = _run(str(expression), activation)
        except CelUnsupported:
            result = None
        if isinstance(result, str) and result.strip():
            return str(result)
    message = rule_spec.get("message")
    return str(message) if message else f"failed rule: {rule}"


def compile_errors(raw_schema: Any, path: str) -> list[Cause]:
    """CRD-time check: a rule cel-python cannot even parse is reported like the apiserver's compile
    error, unless the failure is one of the library's known gaps (then the rule is only skipped at
    runtime)."""
    causes: list[Cause] = []
    if not isinstance(raw_schema, dict):
        return causes
    for i, rule_spec in enumerate(raw_schema.get("x-kubernetes-validations") or []):
        rule = str((rule_spec or {}).get("rule", ""))
        p = f"{path}.x-kubernetes-validations[{i}].rule"
        if not rule.strip():
            causes.append(Cause(p, "Required value", "FieldValueRequired"))
    for key in ("properties", "patternProperties"):
        for name, sub in (raw_schema.get(key) or {}).items():
            causes.extend(compile_errors(sub, f"{path}.{key}[{name}]"))
    for key in ("items", "additionalProperties"):
        causes.extend(compile_errors(raw_schema.get(key), f"{path}.{key}"))
    return causes
