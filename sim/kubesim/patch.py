"""Patch bodies applied the way the apiserver applies them, chosen by Content-Type.

STUB: owned by the kubesim admission/selectors work; the signatures are the contract.
"""

from __future__ import annotations

from typing import Any

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchError(Exception):
    """A patch that cannot be applied; `code` is the HTTP status the server answers (400, 415, 422)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def apply_patch(
    current: dict[str, Any], body: bytes, content_type: str, *, kind: str, builtin: bool
) -> dict[str, Any]:
    """Returns a new object: `current` patched by `body`. Never mutates `current`."""
    raise NotImplementedError
