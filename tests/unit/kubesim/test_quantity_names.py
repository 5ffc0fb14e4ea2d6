"""resource.Quantity canonical forms and apimachinery name rules, as kubesim's admission applies
them."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim import names
from kubesim.admission.quantity import QuantityError, canonical_quantity, parse_quantity

CANONICAL: list[tuple[Any, str]] = [
    ("1000m", "1"),
    ("0.5", "500m"),
    (0.5, "500m"),
    (2, "2"),
    ("1.5Gi", "1536Mi"),
    ("1000", "1k"),
    ("1024", "1024"),
    ("1Ki", "1Ki"),
    ("1e3", "1e3"),
    ("0.1m", "100u"),
    ("100Mi", "100Mi"),
    ("+1", "1"),
    (".5", "500m"),
    ("0", "0"),
    ("512", "512"),
    ("2048Ki", "2Mi"),
    ("1.5", "1500m"),
]


@pytest.mark.parametrize(("raw", "expected"), CANONICAL, ids=[str(c[0]) for c in CANONICAL])
def test_canonical_form(raw: Any, expected: str) -> None:
    assert canonical_quantity(raw) == expected


@pytest.mark.parametrize("raw", ["abc", "1Q", "", "1.2.3", "--1", "Gi", True], ids=repr)
def test_invalid_quantities(raw: Any) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(raw)


_suffix = st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "E"])


@given(number=st.integers(0, 10**6), suffix=_suffix)
def test_canonical_form_is_stable_and_keeps_the_value(number: int, suffix: str) -> None:
    raw = f"{number}{suffix}"
    canonical = canonical_quantity(raw)
    assert canonical_quantity(canonical) == canonical
    assert parse_quantity(canonical).value == parse_quantity(raw).value


def test_values_compare_exactly() -> None:
    assert parse_quantity("1Gi").value == Fraction(2**30)
    assert parse_quantity("500m").value < parse_quantity("1").value


NAME_RULES: list[tuple[str, Any, str, bool]] = [
    ("subdomain-ok", names.is_dns1123_subdomain, "pi-worker-0.pi", True),
    ("subdomain-upper", names.is_dns1123_subdomain, "Pi", False),
    ("subdomain-too-long", names.is_dns1123_subdomain, "a" * 254, False),
    ("label-ok", names.is_dns1123_label, "pi-worker-0", True),
    ("label-dot", names.is_dns1123_label, "pi.worker", False),
    ("label-too-long", names.is_dns1123_label, "a" * 64, False),
    ("dns1035-digit-start", names.is_dns1035_label, "1pi", False),
    ("dns1035-ok", names.is_dns1035_label, "pi", True),
    ("qualified-prefixed", names.is_qualified_name, "training.kubeflow.org/job-role", True),
    ("qualified-empty-prefix", names.is_qualified_name, "/x", False),
    ("qualified-two-slashes", names.is_qualified_name, "a/b/c", False),
    ("label-value-empty", names.is_valid_label_value, "", True),
    ("label-value-bad", names.is_valid_label_value, "-x", False),
    ("config-key-ok", names.is_config_map_key, "discover_hosts.sh", True),
    ("config-key-slash", names.is_config_map_key, "a/b", False),
    ("config-key-dot", names.is_config_map_key, ".", False),
    ("port-name-ok", names.is_valid_port_name, "ssh", True),
    ("port-name-digits", names.is_valid_port_name, "22", False),
    ("port-name-hyphens", names.is_valid_port_name, "a--b", False),
    ("path-segment-slash", names.is_valid_path_segment_name, "a/b", False),
    ("path-segment-ok", names.is_valid_path_segment_name, "system:controller:x", True),
]


@pytest.mark.parametrize(
    ("rule", "value", "ok"), [c[1:] for c in NAME_RULES], ids=[c[0] for c in NAME_RULES]
)
def test_name_rules(rule: Any, value: str, ok: bool) -> None:
    assert (rule(value) == []) is ok


def test_regex_error_wording_matches_apimachinery() -> None:
    assert names.is_dns1123_label("A_b") == [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character "
        "(e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert names.mask_trailing_dash("pi-worker-") == "pi-workea"
