"""Patch bodies applied the way the apiserver applies them, chosen by Content-Type.

Merge patch (RFC 7386), JSON patch (RFC 6902, an op that cannot apply is 422), strategic merge patch
(built-in kinds only, else 415; merge keys and strategies from Kubernetes' own OpenAPI, with the
`$patch`, `$retainKeys`, `$deleteFromPrimitiveList` and `$setElementOrder` directives), and a
SIMPLIFIED server-side apply: the body merged into the live object by list-map keys or as sets,
other lists replaced. Apply does not model managedFields, ownership conflicts (no 409), removal of
fields a manager stops applying, or `force`. An empty `current` means the apply creates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonpatch
import yaml

from kubesim.admission.schema import Node, builtin_schema_for_kind
from kubesim.store import clone

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

_CR_MEDIA_TYPES = f"{JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}"
_INVALID = "the server rejected our request due to an error in our request"

# Used only when a built-in kind has no bundled schema: the merge keys kubectl and controllers rely
# on.
_FALLBACK_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ownerReferences": "uid",
    "conditions": "type",
    "imagePullSecrets": "name",
}


class PatchError(Exception):
    """A patch that cannot be applied; `code` is the HTTP status the server answers (400, 415,
    422)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def apply_patch(
    current: dict[str, Any], body: bytes, content_type: str, *, kind: str, builtin: bool
) -> dict[str, Any]:
    """Returns a new object: `current` patched by `body`. Never mutates `current`."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == MERGE_PATCH:
        return _merge_patch(current, body)
    if media_type == JSON_PATCH:
        return _json_patch(current, body)
    if media_type == STRATEGIC_MERGE_PATCH and builtin:
        return _strategic_merge_patch(current, body, kind)
    if media_type == APPLY_PATCH:
        return _apply_patch(current, body, kind, builtin)
    accepted = _CR_MEDIA_TYPES + (f", {STRATEGIC_MERGE_PATCH}" if builtin else "")
    raise PatchError(
        415,
        "the body of the request was in an unknown format - accepted media types include: "
        f"{accepted}",
    )


def _load_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise PatchError(400, f"error decoding patch: {e}") from None


def _object_body(body: bytes) -> dict[str, Any]:
    patch = _load_json(body)
    if patch is None:
        raise PatchError(400, "Invalid JSON Patch")
    if not isinstance(patch, dict):
        raise PatchError(
            400,
            f"json: cannot unmarshal {_json_kind(patch)} into Go value of type "
            "map[string]interface {}",
        )
    return patch


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


# ----------------------------------------------------------------------------- RFC 7386


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch; returns a new value, sharing nothing with `patch` or `target`."""
    if not isinstance(patch, dict):
        return clone(patch)
    # Keys the patch names are rebuilt below, so only the others need copying here.
    result = (
        {k: v if k in patch else clone(v) for k, v in target.items()}
        if isinstance(target, dict)
        else {}
    )
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _merge_patch(current: dict[str, Any], body: bytes) -> dict[str, Any]:
    patched: dict[str, Any] = merge_patch(current, _object_body(body))
    return patched


# ----------------------------------------------------------------------------- RFC 6902


def _json_patch(current: dict[str, Any], body: bytes) -> dict[str, Any]:
    ops = _load_json(body)
    if not isinstance(ops, list):
        raise PatchError(
            400, f"json: cannot unmarshal {_json_kind(ops)} into Go value of type jsonpatch.Patch"
        )
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise PatchError(422, f"{_INVALID}: operation {i} is not an object: {op!r}")
    try:
        patched = jsonpatch.JsonPatch(ops).apply(current, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, TypeError) as e:
        raise PatchError(422, f"{_INVALID}: {_failing_op(ops, current)}: {e}") from None
    if not isinstance(patched, dict):
        raise PatchError(422, f"{_INVALID}: the patch replaced the whole object with a non-object")
    return patched


def _failing_op(ops: list[dict[str, Any]], current: dict[str, Any]) -> str:
    """Replays op by op to name the first that fails (the library reports only what went wrong)."""
    doc: Any = current
    for i, op in enumerate(ops):
        try:
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=False)
        except Exception:
            return f"op {i} {json.dumps(op, sort_keys=True)}"
    return "patch"


# ----------------------------------------------------------------------------- strategic merge

_DELETE: Any = object()


def _strategic_merge_patch(current: dict[str, Any], body: bytes, kind: str) -> dict[str, Any]:
    patch = _object_body(body)
    merged = _sm_map(current, patch, builtin_schema_for_kind(kind))
    return {} if merged is _DELETE else merged


def _merge_key(node: Node | None, key: str) -> tuple[str, str]:
    """(strategy, merge key) of list field `key` under `node`."""
    if node is None:
        mk = _FALLBACK_MERGE_KEYS.get(key, "")
        return ("merge" if mk or key == "finalizers" else "", mk)
    child = node.child(key)
    if child is None:
        return ("", "")
    return (child.patch_strategy, child.patch_merge_key)


def _child(node: Node | None, key: str) -> Node | None:
    return None if node is None else node.child(key)


def _strip(value: Any) -> Any:
    """A patch value stored as-is: directives dropped, like upstream does for new elements."""
    if isinstance(value, dict):
        return {
            k: _strip(v)
            for k, v in value.items()
            if not k.startswith(
                ("$patch", "$retainKeys", "$deleteFromPrimitiveList/", "$setElementOrder/")
            )
        }
    if isinstance(value, list):
        return [
            _strip(v) for v in value if not (isinstance(v, dict) and v.get("$patch") == "replace")
        ]
    return value


def _sm_map(original: Any, patch: dict[str, Any], node: Node | None) -> Any:
    directive = patch.get("$patch", "merge")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if v is not None})
    if directive != "merge":
        raise PatchError(422, f"{_INVALID}: unknown patch type: {directive}")
    result = clone(original) if isinstance(original, dict) else {}
    orders = {
        key.split("/", 1)[1]: value
        for key, value in patch.items()
        if key.startswith("$setElementOrder/") and isinstance(value, list)
    }
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(result.get(name), list) and isinstance(value, list):
                result[name] = [v for v in result[name] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        strategy, merge_key = _merge_key(node, key)
        if isinstance(value, dict):
            merged = _sm_map(result.get(key), value, _child(node, key))
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and "merge" in strategy.split(","):
            result[key] = _sm_list(
                result.get(key), value, _child(node, key), merge_key, orders.get(key)
            )
        else:
            result[key] = _strip(clone(value))
    for key, order in orders.items():
        if key not in patch and isinstance(result.get(key), list):
            merge_key = _merge_key(node, key)[1]
            result[key] = _normalize_order(result[key], result[key], order, merge_key)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _sm_list(
    original: Any, patch: list[Any], node: Node | None, merge_key: str, order: list[Any] | None
) -> list[Any]:
    base: list[Any] = clone(original) if isinstance(original, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [
            _strip(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")
        ]
    server_order = list(base)
    if not merge_key:  # a merged list of primitives (finalizers): deduplicated union
        merged = base + [v for i, v in enumerate(patch) if v not in base and v not in patch[:i]]
        return _normalize_order(merged, server_order, patch if order is None else order, "")
    item_node = None if node is None else node.items
    for element in patch:
        if not isinstance(element, dict) or merge_key not in element:
            raise PatchError(
                422,
                f"{_INVALID}: map: {element!r} does not contain declared merge key: {merge_key}",
            )
        where = next(
            (
                i
                for i, o in enumerate(base)
                if isinstance(o, dict) and o.get(merge_key) == element[merge_key]
            ),
            None,
        )
        if element.get("$patch") == "delete":
            base = [
                o
                for o in base
                if not (isinstance(o, dict) and o.get(merge_key) == element[merge_key])
            ]
            continue
        merged_item = _sm_map(base[where] if where is not None else {}, element, item_node)
        if where is None:
            base.append(merged_item)
        else:
            base[where] = merged_item
    wanted = [p for p in patch if p.get("$patch") != "delete"] if order is None else order
    return _normalize_order(base, server_order, wanted, merge_key)


def _normalize_order(
    merged: list[Any], server: list[Any], patch_order: list[Any], merge_key: str
) -> list[Any]:
    """strategicpatch.normalizeElementOrder: items named by the patch (or `$setElementOrder`) in the
    patch's order, the server's other items in their old order, interleaved by their old
    positions."""

    def ident(v: Any) -> Any:
        return v.get(merge_key) if merge_key and isinstance(v, dict) else v

    wanted = [ident(o) for o in patch_order]
    server_ids = [ident(o) for o in server]
    right = sorted((m for m in merged if ident(m) in wanted), key=lambda m: wanted.index(ident(m)))
    left = sorted(
        (m for m in merged if ident(m) not in wanted),
        key=lambda m: server_ids.index(ident(m)) if ident(m) in server_ids else len(server_ids),
    )
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if j >= len(right) or (
            i < len(left)
            and ident(left[i]) in server_ids
            and ident(right[j]) in server_ids
            and server_ids.index(ident(left[i])) < server_ids.index(ident(right[j]))
        ):
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out


# ----------------------------------------------------------------------------- server-side apply


def _apply_patch(current: dict[str, Any], body: bytes, kind: str, builtin: bool) -> dict[str, Any]:
    try:
        applied = yaml.safe_load(body)
    except yaml.YAMLError as e:
        raise PatchError(400, f"error decoding YAML: {e}") from None
    if not isinstance(applied, dict):
        raise PatchError(400, "error decoding YAML: the apply configuration must be an object")
    if not current:
        return merge_patch({}, applied)  # type: ignore[no-any-return]
    node = builtin_schema_for_kind(kind) if builtin else None
    merged: dict[str, Any] = _ssa_map(current, applied, node)
    return merged


def _ssa_map(live: Any, applied: dict[str, Any], node: Node | None) -> dict[str, Any]:
    result = clone(live) if isinstance(live, dict) else {}
    for key, value in applied.items():
        child = _child(node, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = _ssa_map(result.get(key), value, child)
        elif isinstance(value, list) and child is not None and child.list_type in ("map", "set"):
            result[key] = _ssa_list(result.get(key), value, child)
        else:
            result[key] = merge_patch(None, value)
    return result


def _ssa_list(live: Any, applied: list[Any], node: Node) -> list[Any]:
    base: list[Any] = clone(live) if isinstance(live, list) else []
    if node.list_type == "set":
        return base + [v for v in applied if v not in base]
    keys = node.list_map_keys

    def same(a: Any) -> Callable[[Any], bool]:
        # a key missing on either side (e.g. a defaulted `protocol`) does not tell elements apart
        return lambda b: (
            isinstance(b, dict) and all(k not in a or k not in b or b[k] == a[k] for k in keys)
        )

    for element in applied:
        if not isinstance(element, dict):
            raise PatchError(
                422, f"{_INVALID}: list element {element!r} has no map keys {list(keys)}"
            )
        match = same(element)
        where = next((i for i, o in enumerate(base) if match(o)), None)
        if where is None:
            base.append(merge_patch({}, element))
        else:
            base[where] = _ssa_map(base[where], element, node.items)
    return base
