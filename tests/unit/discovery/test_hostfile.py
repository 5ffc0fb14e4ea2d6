"""mpi_discovery.hostfile: the hostfile and discover_hosts.sh formats, rendered and read back."""

from __future__ import annotations

import re
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_discovery import hostfile

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
HOST = st.lists(LABEL, min_size=1, max_size=5).map(".".join)
HOSTS = st.dictionaries(HOST, st.integers(min_value=0, max_value=4096), max_size=12).map(
    lambda d: sorted(d.items())
)


@pytest.mark.parametrize(
    ("implementation", "expected"),
    [
        ("OpenMPI", "pi-worker-0.pi.default.svc slots=1\npi-worker-1.pi.default.svc slots=1\n"),
        ("Intel", "pi-worker-0.pi.default.svc:1\npi-worker-1.pi.default.svc:1\n"),
        ("MPICH", "pi-worker-0.pi.default.svc:1\npi-worker-1.pi.default.svc:1\n"),
    ],
    ids=["openmpi", "intel", "mpich"],
)
def test_hostfile_upstream_format(implementation: str, expected: str) -> None:
    hosts = [("pi-worker-0.pi.default.svc", 1), ("pi-worker-1.pi.default.svc", 1)]
    assert hostfile.render_hostfile(hosts, implementation) == expected
    assert hostfile.parse_hostfile(expected) == hosts


def test_empty_hostfile_is_the_empty_string() -> None:
    assert hostfile.render_hostfile([], "OpenMPI") == ""


def test_unknown_implementation_is_refused() -> None:
    with pytest.raises(ValueError, match="IntelMPI"):
        hostfile.render_hostfile_line("h", 1, "IntelMPI")


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("a slots=2\n# comment\n\nb:3\nc\n", [("a", 2), ("b", 3), ("c", 1)]),
        ("a slots=4 max_slots=8  # trailing\n", [("a", 4)]),
    ],
    ids=["mixed-formats", "extra-openmpi-fields"],
)
def test_parse_hostfile_tolerates_hand_written_files(
    text: str, hosts: list[tuple[str, int]]
) -> None:
    assert hostfile.parse_hostfile(text) == hosts


@pytest.mark.parametrize(
    "host",
    [
        "",
        "Worker-0",
        "worker 0",
        "w;rm -rf /",
        "$(reboot)",
        "a..b",
        "-a.b",
        "a-.b",
        "fe80::1",
        "a" * 64,
        ".".join(["a" * 63] * 4) + ".bb",
        "w\nx",
    ],
    ids=[
        "empty",
        "upper-case",
        "space",
        "semicolon",
        "command-substitution",
        "empty-label",
        "leading-dash",
        "trailing-dash",
        "ipv6",
        "label-too-long",
        "name-too-long",
        "newline",
    ],
)
def test_unsafe_host_names_never_reach_a_script(host: str) -> None:
    assert not hostfile.is_dns_name(host)
    with pytest.raises(ValueError, match="DNS-1123"):
        hostfile.render_discover_hosts([(host, 1)])
    with pytest.raises(ValueError, match="DNS-1123"):
        hostfile.render_hostfile([(host, 1)])


@pytest.mark.parametrize("slots", [-1, True, 1.5, "2"], ids=["negative", "bool", "float", "string"])
def test_bad_slots_are_refused(slots: object) -> None:
    with pytest.raises(ValueError, match="slots"):
        hostfile.render_discover_hosts([("w-0", slots)])  # type: ignore[list-item]


def test_duplicate_host_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        hostfile.render_discover_hosts([("w-0", 1), ("w-0", 2)])


@pytest.mark.parametrize(
    ("hosts", "script"),
    [
        ([], "#!/bin/sh\n"),
        (
            [("pi-launcher.pi.default.svc", 1), ("pi-worker-0.pi.default.svc", 1)],
            "#!/bin/sh\necho pi-launcher.pi.default.svc:1\necho pi-worker-0.pi.default.svc:1\n",
        ),
        ([("w-2.pi.ns.svc.example.org", 8)], "#!/bin/sh\necho w-2.pi.ns.svc.example.org:8\n"),
    ],
    ids=["no-hosts", "launcher-and-worker", "cluster-domain"],
)
def test_discover_hosts_script(hosts: list[tuple[str, int]], script: str) -> None:
    assert hostfile.render_discover_hosts(hosts) == script
    assert hostfile.parse_discover_hosts(script) == hosts


def test_parse_upstream_discover_hosts_without_slots() -> None:
    script = "#!/bin/sh\necho pi-worker-0.pi.default.svc\n"
    assert hostfile.parse_discover_hosts(script) == [("pi-worker-0.pi.default.svc", 1)]


@pytest.mark.parametrize(
    "script",
    ["echo a:1\n", "#!/bin/sh\necho a:1; reboot\n", "#!/bin/sh\nprintf a:1\n"],
    ids=["no-shebang", "extra-command", "not-echo"],
)
def test_parse_discover_hosts_refuses_foreign_scripts(script: str) -> None:
    with pytest.raises(ValueError, match=r"discover_hosts\.sh"):
        hostfile.parse_discover_hosts(script)


@pytest.mark.parametrize(
    ("stdout", "error"),
    [
        ("a\n", "host:slots"),
        ("a:\n", "host:slots"),
        ("a:1:2\n", "host:slots"),
        ("A:1\n", "DNS-1123"),
    ],
    ids=["bare-host", "empty-slots", "two-colons", "upper-case"],
)
def test_parse_discovery_output_is_strict(stdout: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        hostfile.parse_discovery_output(stdout)


@given(HOSTS)
def test_discovery_output_lines_are_always_well_formed(hosts: list[tuple[str, int]]) -> None:
    output = hostfile.render_discovery_output(hosts)
    lines = output.splitlines()
    assert len(lines) == len(hosts)
    assert all(re.fullmatch(r"[a-z0-9.-]+:[0-9]+", line) for line in lines)
    assert hostfile.parse_discovery_output(output) == dict(hosts)
    assert hostfile.parse_discover_hosts(hostfile.render_discover_hosts(hosts)) == hosts


@given(HOSTS, st.sampled_from(hostfile.IMPLEMENTATIONS))
def test_hostfile_round_trips(hosts: list[tuple[str, int]], implementation: str) -> None:
    assert hostfile.parse_hostfile(hostfile.render_hostfile(hosts, implementation)) == hosts


def test_rendered_script_prints_exactly_the_discovery_output() -> None:
    hosts = [
        ("pi-launcher.pi.default.svc", 2),
        ("pi-worker-0.pi.default.svc", 1),
        ("w-10.x.y.svc", 0),
    ]
    script = hostfile.render_discover_hosts(hosts)
    result = subprocess.run(
        ["/bin/sh", "-c", script], capture_output=True, text=True, check=True, timeout=10
    )
    assert result.stdout == hostfile.render_discovery_output(hosts)
    assert result.stderr == ""
