"""The RBAC audit (tests/rbac_audit.py, and its session plugin tests/request_audit.py) and the key
scanner (tests/secret_scan.py) catch what they are for: a request outside the rules (named with the
test that sent it), a granted rule unused and unexplained, a README row for nothing, an empty
request record, and private key material in a log line or an object. Checks that cannot fail prove
nothing."""

from __future__ import annotations

import base64

import pytest

import rbac_audit
import request_audit
import secret_scan
from kubesim.control import RecordedRequest
from mpi_operator.desired.secret import generate_ssh_keys

RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch", "create"]},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["update"]},
]
LEASE = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": ["op"],
        "verbs": ["get"],
    }
]


def install() -> rbac_audit.Install:
    return rbac_audit.Install(
        "test install", cluster=rbac_audit.atoms(RULES), lease=rbac_audit.atoms(LEASE)
    )


def request(verb: str, group: str, resource: str, **kw: str) -> rbac_audit.Request:
    fields = {
        "method": "GET",
        "path": "/x",
        "subresource": "",
        "namespace": "ns",
        "name": "",
        "user_agent": "mpi-operator/1",
    }
    fields.update(kw)
    return rbac_audit.request_of(
        verb=verb,
        group=group,
        resource=resource,
        named_resources={("coordination.k8s.io", "leases")},
        **fields,
    )


README = """
<!-- rbac-table -->
| API group | resource | verbs | sent by | not sent, and why |
|---|---|---|---|---|
| `""` | `pods` | `list`, `watch`, `create` | the informer | |
| `batch` | `jobs/status` | `update` | resume | `update`: on resume only, clears startTime |
| `coordination.k8s.io` | `leases` | `get` | leader election | |
<!-- rbac-table -->
"""


def test_a_request_outside_the_rules_is_denied_naming_it_and_its_test() -> None:
    sent = {
        request("create", "", "pods"): "t::ok",
        request("delete", "", "pods", name="w-0"): "t::deletes",
        request(
            "get",
            "coordination.k8s.io",
            "leases",
            name="op",
            user_agent="mpi-operator/1 leader-election",
        ): "t::le",
    }
    report = rbac_audit.audit(
        sent, [install()], rbac_audit.readme_rules(README), check_unused=False
    )
    assert report.denied == [
        "delete pods.core in a namespace, first sent by t::deletes: refused by test install"
    ]
    assert not report.ok


def test_resource_names_limit_the_lease_and_the_leader_election_client_uses_only_its_role() -> None:
    other = request(
        "get",
        "coordination.k8s.io",
        "leases",
        name="other",
        user_agent="mpi-operator/1 leader-election",
    )
    assert install().allowing(other) == []
    mine = request(
        "get",
        "coordination.k8s.io",
        "leases",
        name="op",
        user_agent="mpi-operator/1 leader-election",
    )
    assert install().allowing(mine)
    # The same request from the reconcile client is checked against the watched namespaces' rules
    # only.
    assert install().allowing(request("get", "coordination.k8s.io", "leases", name="op")) == []


def test_an_unused_rule_must_be_explained_and_only_when_unused_is_checked() -> None:
    sent = {request("list", "", "pods"): "t", request("watch", "", "pods"): "t"}
    report = rbac_audit.audit(sent, [install()], rbac_audit.readme_rules(README), check_unused=True)
    # jobs/status update and the lease get are unused: the first is explained, the second is not.
    assert sorted(report.unused) == [
        "create pods.core (its row must name `create` and say why it is granted)",
        "get leases.coordination.k8s.io (its row must name `get` and say why it is granted)",
    ]
    partial = rbac_audit.audit(
        sent, [install()], rbac_audit.readme_rules(README), check_unused=False
    )
    assert partial.ok


def test_readme_rows_must_match_the_grants_both_ways() -> None:
    missing = "\n".join(line for line in README.splitlines() if "jobs/status" not in line)
    extra = README.replace("`list`, `watch`, `create`", "`list`, `watch`, `create`, `delete`")
    report = rbac_audit.audit({}, [install()], rbac_audit.readme_rules(missing), check_unused=False)
    assert report.readme == ["update jobs/status.batch is granted but has no row in the rule table"]
    report = rbac_audit.audit({}, [install()], rbac_audit.readme_rules(extra), check_unused=False)
    assert report.readme == ["delete pods.core has a row but is not granted"]


@pytest.mark.parametrize(
    ("path", "allowed"),
    [("/version", True), ("/apis", True), ("/metrics", False), ("/logs/x", False)],
)
def test_non_resource_urls_are_only_the_discovery_ones(path: str, allowed: bool) -> None:
    sent = {request("", "", "", path=path): "t"}
    report = rbac_audit.audit(
        sent, [install()], rbac_audit.readme_rules(README), check_unused=False
    )
    assert (report.denied == []) is allowed


def test_the_deploy_installs_and_the_readme_table_parse() -> None:
    installs = rbac_audit.kustomize_installs()
    assert [len(i.cluster) > 0 for i in installs] == [
        True,
        True,
    ]  # the namespaced one: gang rules only
    assert installs[1].watched
    assert not installs[0].watched
    assert all(i.lease for i in installs)
    table = rbac_audit.readme_rules(rbac_audit.README.read_text())
    assert ("kubeflow.org", "mpijobs/finalizers", "update") in table
    assert rbac_audit.explained(table[("kubeflow.org", "mpijobs/finalizers", "update")], "update")


def secret_of(pem: bytes, public: bytes = b"") -> dict[str, object]:
    data = {
        "ssh-privatekey": base64.b64encode(pem).decode(),
        "ssh-publickey": base64.b64encode(public).decode(),
    }
    return {"kind": "Secret", "data": data}


def test_the_scanner_finds_a_generated_key_in_a_log_line_an_event_and_a_status() -> None:
    keys = generate_ssh_keys()
    pem = keys.private_key_pem.decode()
    needles = secret_scan.key_needles(secret_of(keys.private_key_pem))
    assert needles
    body = [line for line in pem.splitlines() if not line.startswith("-----")]
    # A log line with one line of the key body and no PEM header: found by its bytes.
    assert secret_scan.leaks(f"INFO building secret {body[0]}", needles)
    assert secret_scan.leaks(f"INFO {pem}", needles)  # the whole PEM: marker and bytes
    assert secret_scan.leaks("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA", ())
    event = {"kind": "Event", "metadata": {"name": "e"}, "message": f"key {body[0][10:50]}"}
    status = {
        "kind": "MPIJob",
        "metadata": {"name": "j"},
        "status": {"note": base64.b64encode(keys.private_key_pem).decode()},
    }
    found = secret_scan.object_leaks([event, status, secret_of(keys.private_key_pem)], needles)
    assert [f.split(":")[0] for f in found if "generated key" in f] == ["Event /e", "MPIJob /j"]


def test_the_scanner_passes_text_without_keys() -> None:
    keys = generate_ssh_keys()
    needles = secret_scan.key_needles(secret_of(keys.private_key_pem, keys.public_key))
    assert needles
    public = keys.public_key.decode()
    assert (
        secret_scan.leaks(f"INFO created Secret default/pi-ssh with public key {public}", needles)
        == []
    )
    assert secret_scan.object_leaks([secret_of(keys.private_key_pem)], needles) == []


# --- the session plugin (tests/request_audit.py) --------------------------------------------------


@pytest.mark.parametrize(
    ("args", "narrowed", "whole"),
    [
        ([], False, True),
        (["tests"], False, True),
        (["."], False, True),
        (["tests/"], True, False),
        (["tests/unit"], False, False),
        (["tests/e2e/test_least_privilege.py"], False, False),
        (["tests::x"], False, False),
    ],
)
def test_unused_rules_are_only_checked_when_the_whole_suite_ran(
    args: list[str], narrowed: bool, whole: bool
) -> None:
    assert request_audit.whole_suite(args, rbac_audit.ROOT, narrowed=narrowed) is whole


def recorded(
    verb: str, resource: str, user_agent: str = "mpi-operator/0.1.0", name: str = ""
) -> RecordedRequest:
    return RecordedRequest(
        method="GET", path="/api/v1/x", query="", verb=verb, group="", version="v1",
        resource=resource, namespace="default", name=name, subresource="", user_agent=user_agent,
        content_type="",
    )  # fmt: skip


def test_the_plugin_fails_when_operator_tests_passed_but_no_request_was_recorded() -> None:
    audit = request_audit.RequestAudit()
    try:
        audit.operator_tests = 3
        audit.run(check_unused=False)
        assert audit.problem is not None
        assert "no operator request was recorded" in audit.problem
    finally:
        audit.stop()


def test_the_plugin_reports_a_denied_request_with_the_test_that_sent_it() -> None:
    audit = request_audit.RequestAudit()
    try:
        audit.current = "tests/x.py::test_deletes_a_configmap"
        for request in (
            recorded("list", "pods"),
            recorded("delete", "configmaps", name="c"),
            recorded("delete", "secrets", user_agent="rc-test"),  # a test's own client: not audited
        ):
            audit.observe(None, request)  # type: ignore[arg-type]
        audit.current = "tests/integration/kube/test_client.py::test_crud"
        audit.observe(None, recorded("delete", "services", name="s"))  # type: ignore[arg-type]
        audit.run(check_unused=False)
        assert audit.problem is None
        assert audit.report is not None
        assert audit.report.denied
        assert {d.split(": refused by")[0] for d in audit.report.denied} == {
            "delete configmaps.core in a namespace, first sent by "
            "tests/x.py::test_deletes_a_configmap"
        }
    finally:
        audit.stop()
