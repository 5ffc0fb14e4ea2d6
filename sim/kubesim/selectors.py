"""Label and field selectors as the apiserver parses and matches them.

STUB: owned by the kubesim admission/selectors work; the signatures are the contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """The selector text is malformed or names an unsupported field (the server answers 400)."""


@dataclass(frozen=True)
class LabelSelector:
    text: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class FieldSelector:
    text: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        raise NotImplementedError


def parse_label_selector(text: str) -> LabelSelector:
    raise NotImplementedError


def parse_field_selector(text: str, *, kind: str) -> FieldSelector:
    raise NotImplementedError
