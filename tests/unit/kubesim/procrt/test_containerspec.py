"""kubesim.procrt.containerspec / envvars: the process a container runs, as kubelet + containerd +
runc."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.images import ImageSpec
from kubesim.procrt.containerspec import (
    DEFAULT_PATH,
    ContainerConfigError,
    ProcessSpec,
    merge_id_file,
    resolve,
)
from kubesim.procrt.envvars import expand, kubelet_env

HOST_PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "cloudsdk:x:1000:1000::/home/cloudsdk:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
HOST_GROUP = "root:x:0:\ndaemon:x:1:\nsudo:x:27:cloudsdk\ncloudsdk:x:1000:\nnogroup:x:65534:\n"
MPIUSER = "mpiuser:x:1000:1000::/home/mpiuser:/bin/sh"
MPI_IMAGE = ImageSpec(
    cmd=("bash",),
    env=(("PATH", f"/opt/mpi/bin:{DEFAULT_PATH}"), ("LANG", "C.UTF-8")),
    working_dir="/home/mpiuser",
    passwd=(MPIUSER,),
    group=("mpiuser:x:1000:", "ssh:x:101:mpiuser"),
)
SHELL = ImageSpec(cmd=("sh",))


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


OBJECTS: dict[tuple[str, str], dict[str, Any]] = {
    ("ConfigMap", "cfg"): {"data": {"MODE": "fast", "LEVEL": "3"}},
    ("ConfigMap", "odd"): {"data": {"ok": "1", "bad=key": "2", "tab\tkey": "3", "1digit": "4"}},
    ("Secret", "creds"): {"data": {"USER": b64("alice"), "PASSWORD": b64("s3cr3t")}},
    ("Secret", "binary"): {"data": {"BLOB": b64(b"\xff\xfeok")}},
}


def lookup(kind: str, name: str) -> Mapping[str, Any] | None:
    return OBJECTS.get((kind, name))


def make_pod(
    container: Mapping[str, Any] | None = None,
    *,
    spec: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-0", "namespace": "team", "uid": "u-1", **(meta or {})},
        "spec": {
            "nodeName": "node-a",
            "serviceAccountName": "builder",
            "containers": [{"name": "main", "image": "img", **(container or {})}],
            **(spec or {}),
        },
    }


def run(
    pod: Mapping[str, Any],
    image: ImageSpec = SHELL,
    *,
    container: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> ProcessSpec:
    options: dict[str, Any] = {
        "host_passwd": HOST_PASSWD,
        "host_group": HOST_GROUP,
        "lookup": lookup,
        "pod_ip": "10.0.0.7",
        "host_ip": "172.18.0.2",
        "node_name": "node-a",
        **kwargs,
    }
    return resolve(pod, container or pod["spec"]["containers"][0], image, **options)


def env_of(container: Mapping[str, Any], image: ImageSpec = SHELL, **pod: Any) -> dict[str, str]:
    return dict(run(make_pod(container, **pod), image).env)


def error_of(
    pod: Mapping[str, Any], image: ImageSpec = SHELL, **kwargs: Any
) -> ContainerConfigError:
    with pytest.raises(ContainerConfigError) as caught:
        run(pod, image, **kwargs)
    return caught.value


# --- command / args / entrypoint / cmd ------------------------------------------------------------


@pytest.mark.parametrize(
    ("entrypoint", "cmd", "command", "args", "argv"),
    [
        # The table of "Define a Command and Arguments for a Container".
        (["/ep-1"], ["foo", "bar"], None, None, ["/ep-1", "foo", "bar"]),
        (["/ep-1"], ["foo", "bar"], ["/ep-2"], None, ["/ep-2"]),
        (["/ep-1"], ["foo", "bar"], None, ["zoo", "boo"], ["/ep-1", "zoo", "boo"]),
        (["/ep-1"], ["foo", "bar"], ["/ep-2"], ["zoo", "boo"], ["/ep-2", "zoo", "boo"]),
        # An empty list is the same as no field.
        (["/ep-1"], ["foo", "bar"], [], [], ["/ep-1", "foo", "bar"]),
        ([], ["sh", "-c", "true"], None, None, ["sh", "-c", "true"]),
        ([], ["sh"], None, ["echo", "hi"], ["echo", "hi"]),
        (["/ep-1"], [], None, None, ["/ep-1"]),
        ([], [], ["/bin/true"], None, ["/bin/true"]),
        ([], [], None, ["/bin/true"], ["/bin/true"]),
        # Docker's ENTRYPOINT [""] clears the entrypoint.
        ([""], ["foo"], None, None, ["foo"]),
        ([""], ["foo"], None, ["zoo"], ["zoo"]),
    ],
)
def test_argv_follows_the_command_and_args_table(
    entrypoint: list[str],
    cmd: list[str],
    command: list[str] | None,
    args: list[str] | None,
    argv: list[str],
) -> None:
    container: dict[str, Any] = {}
    if command is not None:
        container["command"] = command
    if args is not None:
        container["args"] = args
    image = ImageSpec(entrypoint=tuple(entrypoint), cmd=tuple(cmd))
    assert run(make_pod(container), image).argv == tuple(argv)


@pytest.mark.parametrize(
    ("container_id", "message"),
    [
        (None, "failed to generate spec: no command specified"),
        (
            "abc123",
            'failed to generate container "abc123" spec: failed to generate spec: no command '
            "specified",
        ),
    ],
)
def test_nothing_to_run_is_containerds_create_error(container_id: str | None, message: str) -> None:
    err = error_of(make_pod(), ImageSpec(), container_id=container_id)
    assert (err.reason, err.message, str(err)) == ("CreateContainerError", message, message)


# --- $(VAR) expansion -----------------------------------------------------------------------------

EXPANSION_VARS = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Upstream's third_party/forked/golang/expansion tests.
        ("$(VAR_A)", "A"),
        ("$(VAR_A)-$(VAR_A)", "A-A"),
        ("___$(VAR_B)___", "___B___"),
        ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
        ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
        ("$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"),
        ("f000-$$VAR_A", "f000-$VAR_A"),
        ("foo\\$(VAR_C)bar", "foo\\Cbar"),
        ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
        ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
        ("$(VAR_REF)", "$(VAR_A)"),
        ("%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"),
        ("foo$(VAR_EMPTY)bar", "foobar"),
        ("foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"),
        ("f00__(VAR_A)__", "f00__(VAR_A)__"),
        ("$?_boo_$!", "$?_boo_$!"),
        ("$VAR_A", "$VAR_A"),
        ("$(VAR_DNE)", "$(VAR_DNE)"),
        ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
        ("$$$$$$(VAR_A)", "$$$(VAR_A)"),
        ("$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"),
        ("$$$$$$$(VAR_A)", "$$$A"),
        ("$VAR_A)", "$VAR_A)"),
        ("${VAR_A}", "${VAR_A}"),
        ("$(VAR_B)_______$(A", "B_______$(A"),
        ("$(VAR_C)_______$(", "C_______$("),
        ("$(VAR_A)foobarzab$", "Afoobarzab$"),
        ("--$($($($($--", "--$($($($($--"),
        ("$(foo$$var)", "$(foo$$var)"),
        ("\n", "\n"),
        ("$é$(VAR_A)", "$éA"),
    ],
)
def test_expand_matches_upstream(text: str, expected: str) -> None:
    assert expand(text, EXPANSION_VARS) == expected


@given(st.text(), st.dictionaries(st.text(min_size=1), st.text()))
def test_doubled_dollars_round_trip(text: str, variables: dict[str, str]) -> None:
    assert expand(text.replace("$", "$$"), variables) == text


@given(st.text().filter(lambda s: "$$" not in s))
def test_text_without_escapes_is_unchanged_when_nothing_is_defined(text: str) -> None:
    assert expand(text, {}) == text


@given(
    st.text(alphabet=st.characters(blacklist_characters=")")),
    st.text(alphabet=st.characters(blacklist_characters="$")),
    st.text(alphabet=st.characters(blacklist_characters="$")),
    st.text(),
)
def test_references_expand_only_when_defined(
    name: str, before: str, after: str, value: str
) -> None:
    reference = f"{before}$({name}){after}"
    assert expand(reference, {f"other{name}": value}) == reference
    assert expand(reference, {name: value}) == f"{before}{value}{after}"


def test_command_and_args_expand_against_the_kubelets_variables_only() -> None:
    spec = run(
        make_pod(
            {
                "envFrom": [{"configMapRef": {"name": "cfg"}}],
                "env": [{"name": "TARGET", "value": "x-$(MODE)"}],
                "command": ["/bin/$(MODE)"],
                "args": ["$(TARGET)", "$$(TARGET)", "$(LANG)", "$(HOSTNAME)", "$(NOPE)"],
            }
        ),
        MPI_IMAGE,
    )
    # LANG comes from the image and HOSTNAME from the runtime: the kubelet knows neither.
    assert spec.argv == ("/bin/fast", "x-fast", "$(TARGET)", "$(LANG)", "$(HOSTNAME)", "$(NOPE)")


def test_env_values_expand_against_earlier_definitions_only() -> None:
    env = env_of(
        {
            "envFrom": [{"configMapRef": {"name": "cfg"}}],
            "env": [
                {"name": "A", "value": "a"},
                {"name": "B", "value": "$(A)-$(C)-$(MODE)"},
                {"name": "C", "value": "c"},
                {"name": "MODE", "value": "[$(MODE)]"},
                {"name": "ESC", "value": "$$(A)"},
                {"name": "IMG", "value": "$(LANG)"},
            ],
        },
        MPI_IMAGE,
    )
    assert env["B"] == "a-$(C)-fast"
    assert env["MODE"] == "[fast]"
    assert env["ESC"] == "$(A)"
    assert env["IMG"] == "$(LANG)"


# --- valueFrom ------------------------------------------------------------------------------------

LABELLED = {
    "labels": {"app": "web", "tier": "front"},
    "annotations": {"example.com/owner": 'Ann "the" Admin', "note": "two\nlines"},
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.name", "web-0"),
        ("metadata.namespace", "team"),
        ("metadata.uid", "u-1"),
        ("metadata.labels['app']", "web"),
        ("metadata.labels['missing']", ""),
        ("metadata.annotations['example.com/owner']", 'Ann "the" Admin'),
        ("metadata.labels", 'app="web"\ntier="front"'),
        ("metadata.annotations", 'example.com/owner="Ann \\"the\\" Admin"\nnote="two\\nlines"'),
        ("spec.nodeName", "node-a"),
        ("spec.host", "node-a"),
        ("spec.serviceAccountName", "builder"),
        ("status.podIP", "10.0.0.7"),
        ("status.podIPs", "10.0.0.7"),
        ("status.hostIP", "172.18.0.2"),
        ("status.hostIPs", "172.18.0.2"),
    ],
)
def test_field_refs(path: str, expected: str) -> None:
    env = env_of(
        {"env": [{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": path}}}]}, meta=LABELLED
    )
    assert env["V"] == expected


def test_dual_stack_ips_join_with_commas() -> None:
    container = {
        "env": [
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "IPS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIPs"}}},
            {"name": "HOSTS", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIPs"}}},
        ]
    }
    pod = make_pod(container)
    spec = run(pod, pod_ip=["10.0.0.7", "fd00::7"], host_ip=["172.18.0.2", "fc00::2"])
    env = dict(spec.env)
    assert (env["IP"], env["IPS"], env["HOSTS"]) == (
        "10.0.0.7",
        "10.0.0.7,fd00::7",
        "172.18.0.2,fc00::2",
    )


def test_ips_before_assignment_are_empty() -> None:
    container = {"env": [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}
    pod = make_pod(container)
    assert dict(run(pod, pod_ip="").env)["IP"] == ""


@pytest.mark.parametrize(
    ("field_ref", "message"),
    [
        ({"fieldPath": "status.phase"}, "unsupported fieldPath: status.phase"),
        ({"fieldPath": "spec.containers"}, "field label not supported: spec.containers"),
        (
            {"fieldPath": "metadata.name['x']"},
            "field label does not support subscript: metadata.name['x']",
        ),
        ({"fieldPath": "metadata.name", "apiVersion": "v2"}, "unsupported pod version: v2"),
    ],
)
def test_bad_field_refs_are_config_errors(field_ref: dict[str, str], message: str) -> None:
    err = error_of(make_pod({"env": [{"name": "V", "valueFrom": {"fieldRef": field_ref}}]}))
    assert (err.reason, err.message) == ("CreateContainerConfigError", message)


def test_bad_label_subscript_is_a_config_error() -> None:
    ref = {"fieldPath": "metadata.labels['-bad-']"}
    err = error_of(make_pod({"env": [{"name": "V", "valueFrom": {"fieldRef": ref}}]}))
    assert err.message.startswith("invalid key subscript in metadata.labels['-bad-']: ")


def resource_env(resource: str, divisor: str | None = None, **ref: str) -> str:
    selector: dict[str, Any] = {"resource": resource, **ref}
    if divisor is not None:
        selector["divisor"] = divisor
    pod = make_pod(
        {
            "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}, "requests": {"cpu": "250m"}},
            "env": [{"name": "V", "valueFrom": {"resourceFieldRef": selector}}],
        },
        spec={
            "initContainers": [{"name": "setup", "image": "img", "resources": {}}],
        },
    )
    pod["spec"]["containers"].append(
        {
            "name": "side",
            "image": "img",
            "resources": {"limits": {"memory": "0"}, "requests": {"memory": "1"}},
        }
    )
    return dict(run(pod).env)["V"]


@pytest.mark.parametrize(
    ("resource", "divisor", "ref", "expected"),
    [
        # The values themselves are kubesim.downward's (tests/unit/kubesim/test_downward.py); these
        # show the wiring.
        ("limits.cpu", None, {}, "2"),  # 1.5 cores, rounded up
        ("requests.cpu", "100m", {}, "3"),
        ("limits.memory", "1G", {}, "2"),  # memory rounds up too
        ("limits.ephemeral-storage", "1Gi", {}, "1024"),  # unset: the node's 1Ti
        # Another container by name: its zero memory limit reads as the node's, cpu too.
        ("limits.memory", "1Gi", {"containerName": "side"}, "512"),
        ("limits.cpu", None, {"containerName": "side"}, "64"),
        ("requests.memory", None, {"containerName": "side"}, "1"),
        # A named init container keeps its own (unset) limits, as upstream's defaulted pod.
        ("limits.cpu", None, {"containerName": "setup"}, "0"),
    ],
)
def test_resource_field_refs(
    resource: str, divisor: str | None, ref: dict[str, str], expected: str
) -> None:
    assert resource_env(resource, divisor, **ref) == expected


def test_resource_field_refs_fall_back_to_the_node_allocatable() -> None:
    refs = {
        "CPU": {"resource": "limits.cpu"},
        "MEM": {"resource": "limits.memory", "divisor": "1Gi"},
    }
    container = {
        "env": [{"name": k, "valueFrom": {"resourceFieldRef": v}} for k, v in refs.items()]
    }
    env = env_of(container)
    assert (env["CPU"], env["MEM"]) == ("64", "512")
    custom = run(make_pod(container), allocatable={"cpu": "8", "memory": "16Gi"})
    assert (dict(custom.env)["CPU"], dict(custom.env)["MEM"]) == ("8", "16")


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            {"resource": "limits.nvidia.com/gpu"},
            "unsupported container resource : limits.nvidia.com/gpu",
        ),
        ({"resource": "limits.cpu", "containerName": "ghost"}, "container ghost not found"),
    ],
)
def test_bad_resource_refs_are_config_errors(ref: dict[str, str], message: str) -> None:
    err = error_of(make_pod({"env": [{"name": "V", "valueFrom": {"resourceFieldRef": ref}}]}))
    assert (err.reason, err.message) == ("CreateContainerConfigError", message)


def test_key_refs() -> None:
    env = env_of(
        {
            "env": [
                {"name": "M", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "MODE"}}},
                {"name": "P", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}},
                {
                    "name": "O1",
                    "valueFrom": {"secretKeyRef": {"name": "gone", "key": "x", "optional": True}},
                },
                {
                    "name": "O2",
                    "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "x", "optional": True}},
                },
                {
                    "name": "O3",
                    "valueFrom": {
                        "configMapKeyRef": {"name": "gone", "key": "x", "optional": True}
                    },
                },
            ]
        }
    )
    assert (env["M"], env["P"]) == ("fast", "s3cr3t")
    # An optional reference that resolves to nothing leaves the variable unset, not empty.
    assert not {"O1", "O2", "O3"} & env.keys()


@pytest.mark.parametrize(
    ("value_from", "message"),
    [
        ({"secretKeyRef": {"name": "x", "key": "k"}}, 'secret "x" not found'),
        ({"configMapKeyRef": {"name": "x", "key": "k"}}, 'configmap "x" not found'),
        (
            {"secretKeyRef": {"name": "creds", "key": "k"}},
            "couldn't find key k in Secret team/creds",
        ),
        (
            {"configMapKeyRef": {"name": "cfg", "key": "k"}},
            "couldn't find key k in ConfigMap team/cfg",
        ),
        (
            {"secretKeyRef": {"name": "creds", "key": "k", "optional": False}},
            "couldn't find key k in Secret team/creds",
        ),
    ],
)
def test_missing_sources_are_config_errors(value_from: dict[str, Any], message: str) -> None:
    err = error_of(make_pod({"env": [{"name": "V", "valueFrom": value_from}]}))
    assert (err.reason, err.message) == ("CreateContainerConfigError", message)


@pytest.mark.parametrize(
    ("env_from", "message"),
    [
        ({"secretRef": {"name": "x"}}, 'secret "x" not found'),
        ({"configMapRef": {"name": "x"}}, 'configmap "x" not found'),
    ],
)
def test_missing_env_from_sources_are_config_errors(env_from: dict[str, Any], message: str) -> None:
    err = error_of(make_pod({"envFrom": [env_from]}))
    assert (err.reason, err.message) == ("CreateContainerConfigError", message)


def test_env_from_prefixes_and_optional_sources() -> None:
    env = env_of(
        {
            "envFrom": [
                {"configMapRef": {"name": "cfg"}, "prefix": "CFG_"},
                {"secretRef": {"name": "creds"}},
                {"secretRef": {"name": "gone", "optional": True}},
                {"configMapRef": {"name": "gone", "optional": True}, "prefix": "X_"},
            ]
        }
    )
    assert {k: env[k] for k in ("CFG_MODE", "CFG_LEVEL", "USER", "PASSWORD")} == {
        "CFG_MODE": "fast",
        "CFG_LEVEL": "3",
        "USER": "alice",
        "PASSWORD": "s3cr3t",
    }
    assert "MODE" not in env
    assert not any(k.startswith("X_") for k in env)


def test_env_from_skips_invalid_names_with_the_kubelets_event() -> None:
    spec = run(make_pod({"envFrom": [{"configMapRef": {"name": "odd"}, "prefix": "P."}]}))
    env = dict(spec.env)
    # 1.32's relaxed rule: printable ASCII without '='; a leading digit or a dot is fine.
    assert (env["P.ok"], env["P.1digit"]) == ("1", "4")
    assert not {"P.bad=key", "P.tab\tkey"} & env.keys()
    assert spec.warnings == (
        (
            "InvalidEnvironmentVariableNames",
            "Keys [P.bad=key, P.tab\tkey] from the EnvFrom configMap team/odd were skipped since "
            "they are "
            "considered invalid environment variable names.",
        ),
    )


def test_secret_bytes_survive_as_surrogates() -> None:
    env = env_of({"envFrom": [{"secretRef": {"name": "binary"}}]})
    assert os.fsencode(env["BLOB"]) == b"\xff\xfeok"


def test_each_object_is_fetched_once_per_container() -> None:
    calls: list[tuple[str, str]] = []

    def counting(kind: str, name: str) -> Mapping[str, Any] | None:
        calls.append((kind, name))
        return lookup(kind, name)

    container = {
        "envFrom": [
            {"configMapRef": {"name": "cfg"}},
            {"configMapRef": {"name": "cfg"}, "prefix": "B_"},
        ],
        "env": [{"name": "M", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "MODE"}}}],
    }
    result = kubelet_env(make_pod(container), container, lookup=counting)
    assert calls == [("ConfigMap", "cfg")]
    assert dict(result.env)["B_MODE"] == "fast"


# --- order and override ---------------------------------------------------------------------------


def test_environment_order_is_runtime_then_image_then_kubelet_then_home() -> None:
    spec = run(
        make_pod(
            {
                "envFrom": [{"configMapRef": {"name": "cfg"}}],
                "env": [{"name": "EXTRA", "value": "1"}, {"name": "LEVEL", "value": "9"}],
                "securityContext": {"runAsUser": 1000},
            }
        ),
        MPI_IMAGE,
    )
    assert spec.env == (
        ("PATH", f"/opt/mpi/bin:{DEFAULT_PATH}"),
        ("HOSTNAME", "web-0"),
        ("LANG", "C.UTF-8"),
        ("MODE", "fast"),
        ("LEVEL", "9"),  # env overrides envFrom, at envFrom's position
        ("EXTRA", "1"),
        ("HOME", "/home/mpiuser"),
    )


def test_later_definitions_override_in_place() -> None:
    spec = run(
        make_pod(
            {
                "env": [
                    {"name": "LANG", "value": "de_DE"},
                    {"name": "A", "value": "1"},
                    {"name": "B", "value": "2"},
                    {"name": "A", "value": "3"},
                    {"name": "PATH", "value": "/pod/bin"},
                    {"name": "HOSTNAME", "value": "mine"},
                ]
            }
        ),
        MPI_IMAGE,
    )
    assert spec.env == (
        ("PATH", "/pod/bin"),
        ("HOSTNAME", "mine"),
        ("LANG", "de_DE"),
        ("A", "3"),
        ("B", "2"),
        ("HOME", "/root"),
    )


def test_default_path_and_tty_term() -> None:
    spec = run(make_pod({"tty": True}))
    assert spec.env == (
        ("PATH", DEFAULT_PATH),
        ("TERM", "xterm"),
        ("HOSTNAME", "web-0"),
        ("HOME", "/root"),
    )
    assert spec.tty


@pytest.mark.parametrize(("value", "home"), [("/data", "/data"), ("", "/root")])
def test_home_from_the_pod_wins_unless_empty(value: str, home: str) -> None:
    spec = run(make_pod({"env": [{"name": "HOME", "value": value}, {"name": "Z", "value": "z"}]}))
    assert spec.env[-2:] == (("HOME", home), ("Z", "z"))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, "web-0"),
        ({"hostname": "leader"}, "leader"),
        (
            {"hostname": "leader", "subdomain": "workers", "setHostnameAsFQDN": True},
            "leader.workers.team.svc.sim.test",
        ),
    ],
)
def test_hostname_is_the_pods(spec: dict[str, Any], expected: str) -> None:
    result = run(make_pod(spec=spec), cluster_domain="sim.test")
    assert dict(result.env)["HOSTNAME"] == expected


def test_working_directory() -> None:
    assert run(make_pod(), SHELL).cwd == "/"
    assert run(make_pod(), MPI_IMAGE).cwd == "/home/mpiuser"
    assert run(make_pod({"workingDir": "/work"}), MPI_IMAGE).cwd == "/work"


# --- user and groups ------------------------------------------------------------------------------


def test_root_by_default() -> None:
    spec = run(make_pod(), MPI_IMAGE)
    assert (spec.uid, spec.gid, spec.groups, spec.home) == (0, 0, (0,), "/root")


def test_image_passwd_replaces_the_host_line_of_its_uid() -> None:
    spec = run(make_pod({"securityContext": {"runAsUser": 1000}}), MPI_IMAGE)
    assert spec.passwd == (
        "root:x:0:0:root:/root:/bin/bash\n"
        "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
        f"{MPIUSER}\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    assert spec.group == (
        "root:x:0:\ndaemon:x:1:\nsudo:x:27:cloudsdk\nmpiuser:x:1000:\nnogroup:x:65534:\nssh:x:101:mpiuser\n"
    )
    # gid from the image's line; groups: the gid and ssh (lists mpiuser), not sudo (lists cloudsdk).
    assert (spec.uid, spec.gid, spec.groups, spec.home) == (
        1000,
        1000,
        (101, 1000),
        "/home/mpiuser",
    )
    assert dict(spec.env)["HOME"] == "/home/mpiuser"


def test_the_machines_own_passwd_gets_uid_1000_replaced() -> None:
    etc = Path("/etc/passwd")
    host = etc.read_text() if etc.exists() else ""
    if not any(line.split(":")[2:3] == ["1000"] for line in host.splitlines()):
        pytest.skip("no uid 1000 on this machine")
    merged = merge_id_file(host, (MPIUSER,))
    assert [line for line in merged.splitlines() if line.split(":")[2:3] == ["1000"]] == [MPIUSER]
    assert len(merged.splitlines()) == len(host.splitlines())


def test_host_user_groups_come_from_the_group_file() -> None:
    spec = run(make_pod({"securityContext": {"runAsUser": 1000}}), SHELL)
    assert (spec.gid, spec.groups, spec.home) == (1000, (27, 1000), "/home/cloudsdk")


def test_unknown_uid_runs_with_gid_0_and_home_root_dir() -> None:
    spec = run(make_pod(spec={"securityContext": {"runAsUser": 4242}}), MPI_IMAGE)
    assert (spec.uid, spec.gid, spec.groups, spec.home) == (4242, 0, (0,), "/")
    assert dict(spec.env)["HOME"] == "/"


def test_container_security_context_overrides_the_pods() -> None:
    pod = make_pod(
        {"securityContext": {"runAsUser": 1000}},
        spec={"securityContext": {"runAsUser": 1, "runAsGroup": 2000}},
    )
    spec = run(pod, MPI_IMAGE)
    # runAsGroup replaces the passwd gid; the image's ssh group still applies to mpiuser.
    assert (spec.uid, spec.gid, spec.groups) == (1000, 2000, (101, 2000))


def test_fs_group_and_supplemental_groups_are_merged_sorted_and_unique() -> None:
    pod = make_pod(
        {"securityContext": {"runAsUser": 1000}},
        spec={"securityContext": {"fsGroup": 3000, "supplementalGroups": [5, 3000, 101]}},
    )
    assert run(pod, MPI_IMAGE).groups == (5, 101, 1000, 3000)


def test_strict_supplemental_groups_policy_ignores_the_group_file() -> None:
    pod = make_pod(
        {"securityContext": {"runAsUser": 1000}},
        spec={
            "securityContext": {
                "fsGroup": 3000,
                "supplementalGroups": [5],
                "supplementalGroupsPolicy": "Strict",
            }
        },
    )
    spec = run(pod, MPI_IMAGE)
    assert (spec.gid, spec.groups) == (1000, (5, 3000))


def test_a_group_named_like_the_user_is_not_a_supplementary_group() -> None:
    image = ImageSpec(
        cmd=("sh",), passwd=("app:x:500:600::/app:/bin/sh",), group=("app:x:700:app",)
    )
    spec = run(make_pod({"securityContext": {"runAsUser": 500}}), image)
    assert (spec.gid, spec.groups) == (600, (600,))


def test_merge_id_file_appends_new_ids_and_keeps_other_lines() -> None:
    host = (
        "# managed by hand\nroot:x:0:0::/root:/bin/sh\n\nold:x:7:7::/:/bin/sh\n"
        "mpiuser:x:1001:1001::/x:/bin/sh"
    )
    merged = merge_id_file(host, ("new:x:7:7::/new:/bin/sh", MPIUSER, "extra:x:9:9::/:/bin/sh"))
    assert merged == (
        "# managed by hand\nroot:x:0:0::/root:/bin/sh\n\n"
        "new:x:7:7::/new:/bin/sh\n"
        f"{MPIUSER}\n"  # replaces the host's mpiuser of another uid: the image owns the name
        "extra:x:9:9::/:/bin/sh\n"
    )
    assert merge_id_file("", ()) == ""


# --- runAsNonRoot ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("container_sc", "pod_sc", "message"),
    [
        (
            {},
            {"runAsNonRoot": True},
            'container has runAsNonRoot and image will run as root (pod: "web-0_team(u-1)", '
            "container: main)",
        ),
        (
            {"runAsNonRoot": True},
            {},
            'container has runAsNonRoot and image will run as root (pod: "web-0_team(u-1)", '
            "container: main)",
        ),
        (
            {"runAsUser": 0},
            {"runAsNonRoot": True, "runAsUser": 1000},
            'container\'s runAsUser breaks non-root policy (pod: "web-0_team(u-1)", container: '
            "main)",
        ),
    ],
)
def test_run_as_non_root_refuses_root(
    container_sc: dict[str, Any], pod_sc: dict[str, Any], message: str
) -> None:
    err = error_of(make_pod({"securityContext": container_sc}, spec={"securityContext": pod_sc}))
    assert (err.reason, err.message) == ("CreateContainerConfigError", message)


@pytest.mark.parametrize(
    ("container_sc", "pod_sc"),
    [
        ({"runAsUser": 1000}, {"runAsNonRoot": True}),
        ({}, {"runAsNonRoot": True, "runAsUser": 1000}),
        ({"runAsNonRoot": False}, {"runAsNonRoot": True}),
        ({}, {"runAsNonRoot": False}),
    ],
)
def test_run_as_non_root_allows_non_root(
    container_sc: dict[str, Any], pod_sc: dict[str, Any]
) -> None:
    run(make_pod({"securityContext": container_sc}, spec={"securityContext": pod_sc}), MPI_IMAGE)


def test_errors_come_in_the_kubelets_order() -> None:
    missing = {"env": [{"name": "V", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k"}}}]}
    non_root = {"securityContext": {"runAsNonRoot": True}}
    assert (
        error_of(make_pod({**missing, **non_root}), ImageSpec()).message == 'secret "x" not found'
    )
    assert error_of(make_pod(non_root), ImageSpec()).reason == "CreateContainerConfigError"
