"""Label and field selectors: apimachinery syntax, matching and error messages."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.selectors import SelectorError, parse_field_selector, parse_label_selector

WORKER = {
    "training.kubeflow.org/job-name": "pi",
    "training.kubeflow.org/job-role": "worker",
    "training.kubeflow.org/replica-index": "3",
    "mpi_job_name": "pi",
}

LABEL_CASES = [
    ("empty-matches-all", "", WORKER, True),
    ("equals", "mpi_job_name=pi", WORKER, True),
    ("double-equals", "mpi_job_name==pi", WORKER, True),
    ("equals-miss", "mpi_job_name=other", WORKER, False),
    ("equals-absent", "mpi_role_type=launcher", WORKER, False),
    ("not-equals-other", "training.kubeflow.org/job-role!=launcher", WORKER, True),
    ("not-equals-same", "training.kubeflow.org/job-role!=worker", WORKER, False),
    ("not-equals-absent-key-matches", "mpi_role_type!=launcher", WORKER, True),
    ("in", "training.kubeflow.org/job-role in (worker,launcher)", WORKER, True),
    ("in-miss", "training.kubeflow.org/job-role in (launcher)", WORKER, False),
    ("in-absent", "tier in (a,b)", WORKER, False),
    ("notin", "training.kubeflow.org/job-role notin (launcher)", WORKER, True),
    ("notin-hit", "training.kubeflow.org/job-role notin (worker, x)", WORKER, False),
    ("notin-absent-key-matches", "tier notin (a)", WORKER, True),
    ("exists", "mpi_job_name", WORKER, True),
    ("exists-miss", "mpi_role_type", WORKER, False),
    ("not-exists", "!mpi_role_type", WORKER, True),
    ("not-exists-miss", "!mpi_job_name", WORKER, False),
    ("and", "mpi_job_name=pi,training.kubeflow.org/job-role=worker", WORKER, True),
    ("and-one-fails", "mpi_job_name=pi,training.kubeflow.org/job-role=launcher", WORKER, False),
    ("whitespace", "  mpi_job_name =  pi ,  !mpi_role_type ", WORKER, True),
    ("in-whitespace", "training.kubeflow.org/job-role in ( worker , x )", WORKER, True),
    ("in-keyword-as-value", "k in (in,notin)", {"k": "notin"}, True),
    ("empty-value", "k=", {"k": ""}, True),
    ("empty-value-miss", "k=", {"k": "x"}, False),
    ("empty-set-means-empty-string", "k in ()", {"k": ""}, True),
    ("gt", "training.kubeflow.org/replica-index>2", WORKER, True),
    ("lt", "training.kubeflow.org/replica-index<2", WORKER, False),
    ("gt-non-int-label", "mpi_job_name>2", WORKER, False),
]


@pytest.mark.parametrize(
    ("text", "labels", "expected"), [c[1:] for c in LABEL_CASES], ids=[c[0] for c in LABEL_CASES]
)
def test_label_selector_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


LABEL_ERRORS = [
    (
        "missing-operator",
        "a b",
        "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
    ),
    ("unclosed-set", "a in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("no-open-paren", "a in x", "unable to parse requirement: found 'x' expected: '('"),
    ("trailing-comma", "a=b,", "found '', expected: identifier after ','"),
    ("two-values", "a=b c", "found 'c', expected: ',' or 'end of string'"),
    ("not-with-value", "!a=b", "found '=', expected: ',' or 'end of string'"),
    ("leading-operator", "=b", "found '=', expected: !, identifier, or 'end of string'"),
    (
        "bad-key",
        "a/b/c=d",
        'unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name must',
    ),
    (
        "bad-prefix",
        "Bad_Prefix/x=y",
        'unable to parse requirement: <nil>: Invalid value: "Bad_Prefix/x": prefix part',
    ),
    (
        "bad-value",
        "a=$x",
        'unable to parse requirement: values[0][a]: Invalid value: "$x": a valid label must',
    ),
    ("long-value", "a=" + "v" * 64, "must be no more than 63 characters"),
    ("long-key", "k" * 64 + "=v", "name part must be no more than 63 characters"),
    ("gt-not-int", "a>x", "for 'Gt', 'Lt' operators, the value must be an integer"),
]


@pytest.mark.parametrize(
    ("text", "message"), [c[1:] for c in LABEL_ERRORS], ids=[c[0] for c in LABEL_ERRORS]
)
def test_label_selector_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_label_selector(text)
    assert message in str(err.value)
    assert str(err.value).startswith(("unable to parse requirement: ", "found '"))


def test_label_value_regex_message_is_apimachinery_wording() -> None:
    with pytest.raises(SelectorError) as err:
        parse_label_selector("a=-x")
    assert str(err.value).endswith(
        "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    )


_name = st.from_regex(r"[a-z0-9]([a-z0-9_.-]{0,10}[a-z0-9])?", fullmatch=True)
_prefix = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?(\.[a-z0-9]{1,5}){0,2}", fullmatch=True)
_key = st.one_of(_name, st.builds(lambda p, n: f"{p}/{n}", _prefix, _name))
_value = st.one_of(st.just(""), _name)


@st.composite
def _requirement(draw: st.DrawFn) -> tuple[str, str, str, list[str]]:
    key = draw(_key).replace("in", "ix")  # a bare `in`/`notin` key is a keyword, as upstream
    op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"]))
    if op in ("in", "notin"):
        values = draw(st.lists(_name, min_size=1, max_size=3))
        return f"{key} {op} ({', '.join(values)})", key, op, values
    if op == "exists":
        return key, key, op, []
    if op == "!":
        return f"!{key}", key, op, []
    value = draw(_value)
    return f"{key}{op}{value}", key, op, [value]


def _expected(key: str, op: str, values: list[str], labels: dict[str, str]) -> bool:
    if op in ("=", "==", "in"):
        return key in labels and labels[key] in values
    if op in ("!=", "notin"):
        return labels.get(key, object()) not in values
    return (key in labels) == (op == "exists")


@given(
    reqs=st.lists(_requirement(), max_size=4),
    labels=st.dictionaries(_key, _value, max_size=4),
    spaces=st.sampled_from([",", " , ", ",  "]),
)
def test_generated_valid_selectors_parse_and_match_like_their_definition(
    reqs: list[tuple[str, str, str, list[str]]], labels: dict[str, str], spaces: str
) -> None:
    if reqs and labels:
        labels[reqs[0][1]] = (reqs[0][3] or ["x"])[0]  # make some of them hit
    selector = parse_label_selector(spaces.join(r[0] for r in reqs))
    assert selector.matches(labels) == all(_expected(k, op, vs, labels) for _, k, op, vs in reqs)


@given(st.text(max_size=30))
def test_arbitrary_text_either_parses_or_raises_selector_error(text: str) -> None:
    """Never an IndexError or similar: bad text is always a SelectorError (a 400), good text
    well-formed."""
    try:
        selector = parse_label_selector(text)
    except SelectorError:
        return
    assert all(r.key and "," not in r.key and " " not in r.key for r in selector.requirements)


POD: dict[str, Any] = {
    "metadata": {"name": "pi-worker-0", "namespace": "team-a"},
    "spec": {"nodeName": "node-1", "restartPolicy": "Never", "schedulerName": "default-scheduler"},
    "status": {"phase": "Running", "podIP": "10.244.0.7", "podIPs": [{"ip": "10.244.0.7"}]},
}
EVENT: dict[str, Any] = {
    "metadata": {"name": "pi.1", "namespace": "team-a"},
    "involvedObject": {"kind": "MPIJob", "name": "pi", "namespace": "team-a", "uid": "u1"},
    "reason": "MPIJobCreated",
    "type": "Normal",
    "source": {"component": "mpi-job-controller"},
}
NEW_EVENT: dict[str, Any] = {
    "metadata": {"name": "pi.2", "namespace": "team-a"},
    "regarding": {"kind": "MPIJob", "name": "pi"},
    "reason": "Scaled",
    "type": "Warning",
}

FIELD_CASES: list[tuple[str, str, str, dict[str, Any], bool]] = [
    ("empty", "", "Pod", POD, True),
    ("name", "metadata.name=pi-worker-0", "Pod", POD, True),
    ("name-double-equals", "metadata.name==pi-worker-0", "Pod", POD, True),
    ("name-miss", "metadata.name=pi-worker-1", "Pod", POD, False),
    ("namespace-not-equals", "metadata.namespace!=default", "Pod", POD, True),
    ("phase-and-node", "status.phase=Running,spec.nodeName=node-1", "Pod", POD, True),
    ("phase-not-in-terminal", "status.phase!=Succeeded,status.phase!=Failed", "Pod", POD, True),
    ("pod-ip", "status.podIP=10.244.0.7", "Pod", POD, True),
    ("restart-policy", "spec.restartPolicy=Never", "Pod", POD, True),
    ("missing-field-is-empty", "spec.serviceAccountName=", "Pod", POD, True),
    ("event-involved", "involvedObject.kind=MPIJob,involvedObject.name=pi", "Event", EVENT, True),
    ("event-reason-type", "reason=MPIJobCreated,type=Normal", "Event", EVENT, True),
    ("event-source", "source=mpi-job-controller", "Event", EVENT, True),
    ("events-k8s-io-shape", "involvedObject.name=pi,type=Warning", "Event", NEW_EVENT, True),
    (
        "secret-type",
        "type=kubernetes.io/ssh-auth",
        "Secret",
        {"type": "kubernetes.io/ssh-auth"},
        True,
    ),
    ("job-successful", "status.successful=1", "Job", {"status": {"successful": 1}}, True),
    ("job-successful-default", "status.successful=0", "Job", {"status": {}}, True),
    ("namespace-phase", "status.phase=Active", "Namespace", {"status": {"phase": "Active"}}, True),
    ("escaped-comma", r"metadata.name=a\,b", "ConfigMap", {"metadata": {"name": "a,b"}}, True),
    (
        "cluster-scoped-namespace-empty",
        "metadata.namespace=",
        "Namespace",
        {"metadata": {"name": "x"}},
        True,
    ),
]


@pytest.mark.parametrize(
    ("text", "kind", "obj", "expected"),
    [c[1:] for c in FIELD_CASES],
    ids=[c[0] for c in FIELD_CASES],
)
def test_field_selector_matches(text: str, kind: str, obj: dict[str, Any], expected: bool) -> None:
    assert parse_field_selector(text, kind=kind).matches(obj) is expected


FIELD_ERRORS = [
    (
        "unsupported-on-kind",
        "status.phase=Running",
        "ConfigMap",
        "field label not supported: status.phase",
    ),
    ("unknown", "spec.foo=bar", "Pod", "field label not supported: spec.foo"),
    ("crd-only-metadata", "spec.replicas=1", "MPIJob", "field label not supported: spec.replicas"),
    (
        "no-operator",
        "metadata.name",
        "Pod",
        "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
    ),
    ("bad-escape", r"metadata.name=a\x", "Pod", "invalid field selector: invalid escape sequence"),
]


@pytest.mark.parametrize(
    ("text", "kind", "message"), [c[1:] for c in FIELD_ERRORS], ids=[c[0] for c in FIELD_ERRORS]
)
def test_field_selector_errors(text: str, kind: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_field_selector(text, kind=kind)
    assert str(err.value).startswith(message)
