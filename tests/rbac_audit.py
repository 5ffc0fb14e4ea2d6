"""The operator's API requests against the RBAC that deploy/ and the chart grant: pure, no pytest.

`tests/request_audit.py` (a pytest plugin) feeds it every request the operator sent over a test
session; `tests/e2e/test_least_privilege.py` feeds it one MPIJob's life. Requests are aggregated to
what RBAC decides on (verb, API group, resource, subresource, scope, and the name where a rule
limits names), as the API server's RequestInfoFactory derives them (kubesim's `server.request_info`
does the same).

An install is one way the operator is deployed: the cluster-wide or namespaced kustomize overlay, or
the chart with or without `watchNamespaces`, each with gang scheduling on (the superset: a request
of a run without it is a subset). Every request must be allowed by every install; every granted
(group, resource, verb) must be sent by some request or named, with why, in deploy/README.md's rule
table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
README = DEPLOY / "README.md"
CHART = DEPLOY / "charts" / "mpi-operator"
OPERATOR_AGENT = "mpi-operator/"
"""Prefix of the operator's user agents (`kube.client.DEFAULT_USER_AGENT`, plus "
leader-election")."""
LEADER_ELECTION = "leader-election"
OPERATOR_NS = "mpi-operator"
SERVICE_ACCOUNT = "mpi-operator"
DISCOVERY_PATHS = re.compile(r"^/(api|apis|version|openapi)(/.*)?$|^/(healthz|livez|readyz)$")
"""Non-resource URLs every authenticated client may GET (the built-in `system:discovery` and
`system:public-info-viewer` ClusterRoles), so no role of ours needs to grant them."""
CLUSTER_SCOPED = frozenset(
    {
        ("", "namespaces"),
        ("", "nodes"),
        ("", "persistentvolumes"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("scheduling.k8s.io", "priorityclasses"),
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
    }
)
Obj = dict[str, Any]


@dataclass(frozen=True, order=True)
class Request:
    """What RBAC decides a request on. `scope`: "cluster" (a cluster-scoped resource), "all" (a
    namespaced resource across all namespaces), "namespace" (in one namespace) or "nonresource"
    (`path` set)."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    scope: str = "namespace"
    name: str = ""
    leader_election: bool = False
    path: str = ""

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def describe(self) -> str:
        if self.scope == "nonresource":
            return f"{self.verb} {self.path} (non-resource URL)"
        where = {
            "cluster": "cluster-scoped",
            "all": "in all namespaces",
            "namespace": "in a namespace",
        }
        named = f" named {self.name!r}" if self.name else ""
        who = " by the leader-election client" if self.leader_election else ""
        return (
            f"{self.verb} {self.full_resource}.{self.group or 'core'}{named} "
            f"{where[self.scope]}{who}"
        )


def request_of(
    *,
    method: str,
    path: str,
    verb: str,
    group: str,
    resource: str,
    subresource: str,
    namespace: str,
    name: str,
    user_agent: str,
    named_resources: Iterable[tuple[str, str]] = (),
) -> Request:
    """A recorded request -> its RBAC attributes. The name is kept only for `named_resources`, those
    a rule limits by resourceNames (keeping every pod's name would make the set grow with the
    suite)."""
    if not resource:
        return Request(method.lower(), "", "", scope="nonresource", path=path)
    scope = (
        "namespace" if namespace else "cluster" if (group, resource) in CLUSTER_SCOPED else "all"
    )
    kept = name if (group, resource) in set(named_resources) else ""
    return Request(verb, group, resource, subresource, scope, kept, LEADER_ELECTION in user_agent)


@dataclass(frozen=True, order=True)
class Atom:
    """One (group, resource[/subresource], verb) a rule grants; `names` empty means any name."""

    group: str
    resource: str
    verb: str
    names: tuple[str, ...] = ()

    @property
    def grant(self) -> tuple[str, str, str]:
        return (self.group, self.resource, self.verb)

    def allows(self, request: Request) -> bool:
        return (
            (self.group, self.resource, self.verb)
            == (request.group, request.full_resource, request.verb)
            and (not self.names or request.name in self.names)
            # Names cannot limit a list, watch or create across a collection (as the RBAC
            # authorizer).
            and (not self.names or bool(request.name))
        )


def atoms(rules: Iterable[Mapping[str, Any]]) -> list[Atom]:
    return [
        Atom(group, resource, verb, tuple(rule.get("resourceNames") or ()))
        for rule in rules
        for group in rule.get("apiGroups") or ()
        for resource in rule.get("resources") or ()
        for verb in rule.get("verbs") or ()
    ]


@dataclass
class Install:
    """What one install grants the operator's ServiceAccount: `cluster` (ClusterRoles, any
    namespace), `watched` (the Role in each watched namespace; empty when cluster-wide) and `lease`
    (the Role in the operator's own namespace, for leader election)."""

    name: str
    cluster: list[Atom] = field(default_factory=list)
    watched: list[Atom] = field(default_factory=list)
    lease: list[Atom] = field(default_factory=list)

    def allowing(self, request: Request) -> list[Atom]:
        """The atoms that allow `request`; empty when this install refuses it. A request in a
        namespace or across all of them stands for the operator's requests in each namespace it
        watches (with `--namespace`, its informers list and watch per namespace); the
        leader-election client only talks to the operator's namespace."""
        if request.scope == "nonresource":
            return []
        if request.leader_election:
            candidates = [*self.cluster, *self.lease]
        elif request.scope == "cluster":
            candidates = self.cluster
        else:
            candidates = [*self.cluster, *self.watched]
        return [a for a in candidates if a.allows(request)]

    def grants(self) -> set[tuple[str, str, str]]:
        return {a.grant for a in (*self.cluster, *self.watched, *self.lease)}

    def named_resources(self) -> set[tuple[str, str]]:
        return {
            (a.group, a.resource) for a in (*self.cluster, *self.watched, *self.lease) if a.names
        }


def install_of(name: str, objs: Iterable[Obj], sa_namespace: str, sa_name: str) -> Install:
    """The grants of rendered manifests to one ServiceAccount, through their bindings."""
    objs = list(objs)
    roles = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in objs
        if o["kind"] in ("Role", "ClusterRole")
    }

    def bound(binding: Obj) -> bool:
        return any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == sa_name
            and s.get("namespace") == sa_namespace
            for s in binding.get("subjects") or ()
        )

    install = Install(name)
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding") or not bound(b):
            continue
        ref = b["roleRef"]
        ns = b["metadata"].get("namespace", "") if b["kind"] == "RoleBinding" else ""
        role = roles.get((ref["kind"], ns if ref["kind"] == "Role" else "", ref["name"]))
        assert role is not None, (
            f"{b['kind']} {b['metadata']['name']} refers to a missing {ref['kind']}"
        )
        granted = atoms(role.get("rules") or ())
        if b["kind"] == "ClusterRoleBinding":
            install.cluster += granted
        elif ns == sa_namespace:
            install.lease += granted
        else:
            install.watched += granted
    return install


# --- the installs of deploy/ ----------------------------------------------------------------------


def _docs(path: Path, namespace: str) -> list[Obj]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for d in docs:
        if d["kind"] in ("Role", "RoleBinding"):
            d["metadata"].setdefault("namespace", namespace)
    return docs


def kustomize_installs() -> list[Install]:
    """The two overlays with the gang-scheduling component, from the files themselves (the objects
    kustomize would render, as base/kustomization.yaml puts the Roles in namespace `mpi-operator`;
    tests/e2e/test_install_kustomize.py checks the real rendering against the same rules)."""
    base = DEPLOY / "base"
    lease = _docs(base / "leader-election-rbac.yaml", OPERATOR_NS)
    gang = _docs(DEPLOY / "components" / "gang-scheduling" / "rbac.yaml", OPERATOR_NS)
    cluster_wide = [
        *_docs(base / "clusterrole.yaml", ""),
        *_docs(base / "clusterrolebinding.yaml", ""),
        *lease,
    ]
    namespaced = [*_docs(DEPLOY / "overlays" / "namespaced" / "role.yaml", OPERATOR_NS), *lease]
    return [
        install_of(
            "kustomize overlays/cluster-wide + gang-scheduling",
            [*cluster_wide, *gang],
            OPERATOR_NS,
            SERVICE_ACCOUNT,
        ),
        install_of(
            "kustomize overlays/namespaced + gang-scheduling",
            [*namespaced, *gang],
            OPERATOR_NS,
            SERVICE_ACCOUNT,
        ),
    ]


CHART_VALUES: dict[str, dict[str, Any]] = {
    "chart, all namespaces, gangScheduling=volcano": {"gangScheduling": "volcano"},
    "chart, watchNamespaces=[team-a], gangScheduling=volcano": {
        "gangScheduling": "volcano",
        "watchNamespaces": ["team-a"],
    },
}


def chart_installs() -> list[Install]:
    """The chart rendered by the Helm library (helm-python-sdk, a dev dependency)."""
    import helm_python as helm  # type: ignore[import-not-found,unused-ignore]

    installs = []
    for name, values in CHART_VALUES.items():
        with helm.Chart.load(CHART) as chart:
            manifests = chart.render(
                values, name="mpi-operator", namespace=OPERATOR_NS, is_install=True
            )
        objs = [
            o
            for p, text in manifests.items()
            if p.endswith(".yaml")
            for o in yaml.safe_load_all(text)
            if o
        ]
        installs.append(install_of(name, objs, OPERATOR_NS, SERVICE_ACCOUNT))
    return installs


# --- deploy/README.md's rule table ----------------------------------------------------------------

_CODE = re.compile(r"`([^`]*)`")


def readme_rules(text: str) -> dict[tuple[str, str, str], str]:
    """The README's rule table: (group, resource, verb) -> the last column, where a verb a plain
    job's life does not send is named with why it is granted. Rows: | group | resource | verbs | ...
    | why |."""
    table: dict[tuple[str, str, str], str] = {}
    section = text.split("<!-- rbac-table -->")
    if len(section) < 3:
        return table
    for line in section[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        groups = _CODE.findall(cells[0])
        resources = _CODE.findall(cells[1])
        verbs = _CODE.findall(cells[2])
        for group in groups:
            for resource in resources:
                for verb in verbs:
                    table[(group.strip('"'), resource, verb)] = cells[-1]
    return table


def explained(why: str, verb: str) -> bool:
    """The last column names `verb` in backticks, followed by a reason."""
    return re.search(rf"`{re.escape(verb)}`[^|]*\w", why) is not None and len(why) > len(verb) + 20


# --- the audit ------------------------------------------------------------------------------------


@dataclass
class Report:
    denied: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    readme: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.denied or self.unused or self.readme)

    def lines(self) -> list[str]:
        out = [f"DENIED: {d}" for d in self.denied]
        out += [f"UNUSED and not explained in deploy/README.md: {u}" for u in self.unused]
        out += [f"README: {r}" for r in self.readme]
        return out


def audit(
    requests: Mapping[Request, str],
    installs: Iterable[Install],
    readme: Mapping[tuple[str, str, str], str],
    *,
    check_unused: bool,
) -> Report:
    """`requests` (each with where it was first seen) against every install. With `check_unused`,
    every granted (group, resource, verb) no request used must be explained in the README's
    table."""
    report = Report()
    installs = list(installs)
    used: set[tuple[str, str, str]] = set()
    granted: set[tuple[str, str, str]] = set()
    for install in installs:
        granted |= install.grants()
        for request, first in sorted(requests.items()):
            if request.scope == "nonresource":
                if not (request.verb == "get" and DISCOVERY_PATHS.match(request.path)):
                    report.denied.append(
                        f"{request.describe()}, first sent by {first}: not a discovery URL"
                    )
                continue
            allowing = install.allowing(request)
            if not allowing:
                report.denied.append(
                    f"{request.describe()}, first sent by {first}: refused by {install.name}"
                )
            used |= {a.grant for a in allowing}
    for grant in sorted(granted):
        group, resource, verb = grant
        label = f"{verb} {resource}.{group or 'core'}"
        if grant not in readme:
            report.readme.append(f"{label} is granted but has no row in the rule table")
        elif check_unused and grant not in used and not explained(readme[grant], verb):
            report.unused.append(f"{label} (its row must name `{verb}` and say why it is granted)")
    for grant in sorted(set(readme) - granted):
        report.readme.append(
            f"{grant[2]} {grant[1]}.{grant[0] or 'core'} has a row but is not granted"
        )
    return report
