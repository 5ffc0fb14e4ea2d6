"""desired.sshd: the port a worker's sshd listens on, read from its pod spec, or None (never a
guess).

Tables for the command-line forms and where sshd is found in the argv; properties (hypothesis) for
totality, the named port's precedence and shell quoting; and, where an OpenSSH sshd is installed,
sshd itself (`sshd -T` prints the addresses it would listen on) as the oracle for generated command
lines.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpi_operator.desired.sshd import (
    container_ssh_port,
    named_ssh_port,
    parse_port,
    sshd_arguments,
    sshd_port,
)

SSHD = "/usr/sbin/sshd"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(
    ("text", "port"),
    [
        ("22", 22),
        ("2222", 2222),
        ("02222", 2222),
        ("65535", 65535),
        ("1", 1),
        ("0", None),
        ("65536", None),
        ("123456", None),
        ("", None),
        ("ssh", None),
        ("-1", None),
        ("+22", None),
        (" 22", None),
        ("22 ", None),
        ("$(SSH_PORT)", None),
        ("٢٢", None),  # Arabic-Indic digits: Python's int() takes them, sshd does not
    ],
)
def test_parse_port(text: str, port: int | None) -> None:
    assert parse_port(text) == port


ARGS = {
    # upstream's default and its pi.yaml: the port is in a config file, so unknown
    "default-command": (["-De"], None),
    "upstream-pi-config-file": (["-De", "-f", "/home/mpiuser/.sshd_config"], None),
    "no-arguments": ([], None),
    # -p
    "p-separate": (["-De", "-p", "2222"], 2222),
    "p-attached": (["-De", "-p2222"], 2222),
    "p-in-a-flag-cluster": (["-Dep2222"], 2222),
    "p-ending-a-flag-cluster": (["-Dep", "2222"], 2222),
    "p-before-flags": (["-p", "2222", "-D", "-e"], 2222),
    "p-twice-first-wins": (["-D", "-p", "2222", "-p", "3333"], 2222),
    "p-after-config-file": (["-D", "-f", "/etc/ssh/other", "-p", "2222"], 2222),
    "p-after-an-operand": (["-D", "stray", "-p", "2222"], 2222),  # glibc getopt permutes operands
    "p-22-is-known-when-said": (["-D", "-p", "22"], 22),
    # -o Port, every spelling of ssh_config's syntax
    "o-port-equals": (["-D", "-o", "Port=2222"], 2222),
    "o-attached": (["-D", "-oPort=2222"], 2222),
    "o-port-space": (["-D", "-o", "Port 2222"], 2222),
    "o-port-spaced-equals": (["-D", "-o", "Port = 2222"], 2222),
    "o-port-tab": (["-D", "-o", "Port\t2222"], 2222),
    "o-port-lower-case": (["-D", "-o", "port=2222"], 2222),
    "o-port-upper-case": (["-D", "-o", "PORT 2222"], 2222),
    "o-port-leading-space": (["-D", "-o", "  Port 2222"], 2222),
    "o-port-quoted-value": (["-D", "-o", 'Port "2222"'], 2222),
    "o-port-trailing-comment": (["-D", "-o", "Port 2222 # ssh"], 2222),
    "o-port-twice-first-wins": (["-D", "-o", "Port=2222", "-o", "Port=3333"], 2222),
    "o-other-options-only": (["-D", "-o", "StrictModes=no", "-o", "PermitRootLogin yes"], None),
    "o-among-other-options": (["-De", "-o", "StrictModes=no", "-o", "Port=2222"], 2222),
    "o-port-not-a-keyword-prefix": (["-D", "-o", "PortForwarding=2222"], None),
    # -p and -o Port: sshd listens on both; -p is always one of them
    "p-wins-over-o-port": (["-D", "-o", "Port=3333", "-p", "2222"], 2222),
    "p-wins-over-later-o-port": (["-D", "-p", "2222", "-o", "Port=3333"], 2222),
    # ListenAddress with a port: sshd listens only there, whatever -p says
    "listen-address-port": (["-D", "-p", "2222", "-o", "ListenAddress=0.0.0.0:3333"], 3333),
    "listen-address-ipv6-port": (["-D", "-o", "ListenAddress [::]:3333"], 3333),
    "listen-address-rdomain": (["-D", "-o", "ListenAddress 0.0.0.0:3333 rdomain vrf0"], 3333),
    "listen-address-without-port": (["-D", "-p", "2222", "-o", "ListenAddress 0.0.0.0"], 2222),
    "listen-address-bare-ipv6": (["-D", "-p", "2222", "-o", "ListenAddress ::"], 2222),
    "listen-address-bracketed-without-port": (
        ["-D", "-p", "2222", "-o", "ListenAddress [::1]"],
        2222,
    ),
    "listen-address-only-without-port": (["-D", "-o", "ListenAddress 0.0.0.0"], None),
    # what sshd refuses, or what we cannot read, is unknown
    "p-not-a-number": (["-D", "-p", "abc"], None),
    "p-service-name": (["-D", "-p", "ssh"], None),
    "p-zero": (["-D", "-p", "0"], None),
    "p-too-big": (["-D", "-p", "65536"], None),
    "p-kubernetes-variable": (["-D", "-p", "$(SSH_PORT)"], None),
    "p-missing-argument": (["-D", "-p"], None),
    "p-one-bad-of-two": (["-D", "-p", "2222", "-p", "x"], None),
    "o-missing-argument": (["-D", "-o"], None),
    "o-port-without-value": (["-D", "-o", "Port"], None),
    "o-port-two-values": (["-D", "-o", "Port 2222 3333"], None),
    "o-port-double-equals": (["-D", "-o", "Port==2222"], None),
    "o-port-unbalanced-quote": (["-D", "-o", 'Port "2222'], None),
    "o-port-bad-then-p": (["-D", "-o", "Port=x", "-p", "2222"], None),
    "listen-address-bad-port": (["-D", "-o", "ListenAddress 0.0.0.0:x", "-p", "2222"], None),
    "listen-address-empty-port": (["-D", "-o", "ListenAddress 0.0.0.0:", "-p", "2222"], None),
    "listen-address-bad-rdomain": (
        ["-D", "-o", "ListenAddress 0.0.0.0:3333 vrf0 x", "-p", "2222"],
        None,
    ),
    "listen-address-unclosed-bracket": (
        ["-D", "-o", "ListenAddress [::1:3333", "-p", "2222"],
        None,
    ),
    "unknown-option": (["-D", "-X", "-p", "2222"], None),
    "long-option": (["-D", "--port", "2222"], None),
    "after-double-dash": (["-D", "--", "-p", "2222"], None),
}


@pytest.mark.parametrize(("arguments", "port"), list(ARGS.values()), ids=list(ARGS))
def test_sshd_port(arguments: list[str], port: int | None) -> None:
    assert sshd_port(arguments) == port


ARGV = {
    "plain": ([SSHD, "-De", "-p", "2222"], ["-De", "-p", "2222"]),
    "bare-name": (["sshd", "-p", "2222"], ["-p", "2222"]),
    "relative-path": (["./sbin/sshd", "-D"], ["-D"]),
    "behind-tini": (["tini", "--", SSHD, "-D", "-p", "2222"], ["-D", "-p", "2222"]),
    "behind-an-entrypoint": (["/entrypoint.sh", SSHD, "-D"], ["-D"]),
    "first-sshd-wins": (
        [SSHD, "-D", "-p", "1", SSHD, "-p", "2"],
        ["-D", "-p", "1", SSHD, "-p", "2"],
    ),
    "no-sshd": (["/entrypoint.sh", "--port", "2222"], None),
    "sshd-like-names": (["/usr/sbin/sshd.sh", "sshd-session", "my-sshd", "-p", "2222"], None),
    "empty": ([], None),
    "sh-c": (["/bin/sh", "-c", f"{SSHD} -De -p 2222"], ["-De", "-p", "2222"]),
    "sh-c-exec": (["sh", "-c", f"exec {SSHD} -De -p 2222"], ["-De", "-p", "2222"]),
    "sh-c-after-mkdir": (
        ["/bin/sh", "-c", f"mkdir -p /run/sshd && exec {SSHD} -D -p 2222"],
        ["-D", "-p", "2222"],
    ),
    "sh-c-mkdir-only": (["/bin/sh", "-c", "mkdir -p /run/sshd"], None),
    "sh-c-sshd-as-an-argument": (["/bin/sh", "-c", "ls /run/sshd -p 2222"], None),
    "sh-c-newlines": (
        ["/bin/bash", "-c", f"set -e\nmkdir -p /run/sshd\n{SSHD} -D \\\n  -p 2222\n"],
        ["-D", "-p", "2222"],
    ),
    "sh-c-background-then-train": (
        ["sh", "-c", f"{SSHD} -D -p 2222 & python train.py -p 5"],
        ["-D", "-p", "2222"],
    ),
    "sh-c-redirection": (
        ["sh", "-c", f"{SSHD} -De -p 2222 2>/var/log/sshd"],
        ["-De", "-p", "2222", "2"],
    ),
    "sh-c-quoted-option": (["sh", "-c", f"{SSHD} -D -o 'Port 2222'"], ["-D", "-o", "Port 2222"]),
    "sh-c-assignment-and-nohup": (
        ["sh", "-c", f"LANG=C nohup {SSHD} -D -p 2222"],
        ["-D", "-p", "2222"],
    ),
    "sh-c-comment": (
        ["sh", "-c", f"mkdir -p /run/sshd # then sshd -p 1\n{SSHD} -D -p 2222"],
        ["-D", "-p", "2222"],
    ),
    "sh-c-sshd-in-a-comment-only": (["sh", "-c", "true # sshd -p 2222"], None),
    "bash-lc": (["bash", "-lc", "sshd -D -p 2222"], ["-D", "-p", "2222"]),
    "bash-options-then-c": (["bash", "-o", "pipefail", "-e", "-c", "sshd -p2222"], ["-p2222"]),
    "bash-c-then-options": (["bash", "-c", "-e", "sshd -p2222"], ["-p2222"]),
    "busybox-sh": (["busybox", "sh", "-c", "sshd -p 2222"], ["-p", "2222"]),
    "sh-script-file-not-c": (["sh", "/start-sshd.sh"], None),
    "sh-c-exec-positional": (
        ["sh", "-c", 'mkdir -p /run/sshd; exec "$@"', "sh", SSHD, "-D", "-p", "2222"],
        ["-D", "-p", "2222"],
    ),
    "sh-c-script-naming-sshd-is-not-sshd": (["sh", "-c", "mkdir /run/sshd", "x"], None),
    "sh-c-unbalanced-quotes": (["sh", "-c", "sshd -p '2222"], None),
    "sh-c-without-script": (["sh", "-c"], None),
}


@pytest.mark.parametrize(("argv", "arguments"), list(ARGV.values()), ids=list(ARGV))
def test_sshd_arguments(argv: list[str], arguments: list[str] | None) -> None:
    assert sshd_arguments(argv) == arguments


CONTAINERS = {
    "upstream-pi-yaml": (
        {"command": [SSHD], "args": ["-De", "-f", "/home/mpiuser/.sshd_config"]},
        None,
    ),
    "operator-default-command": ({"command": [SSHD, "-De"]}, None),
    "args-only-image-entrypoint-unknown": ({"args": ["-p", "2222"]}, None),
    "command-and-args": ({"command": [SSHD], "args": ["-De", "-p", "2222"]}, 2222),
    "named-port": (
        {"command": [SSHD, "-De"], "ports": [{"name": "ssh", "containerPort": 2222}]},
        2222,
    ),
    "named-port-wins-over-command": (
        {"command": [SSHD, "-p", "3333"], "ports": [{"name": "ssh", "containerPort": 2222}]},
        2222,
    ),
    "other-named-port": (
        {"command": [SSHD, "-De"], "ports": [{"name": "metrics", "containerPort": 22}]},
        None,
    ),
    "unnamed-port": ({"command": [SSHD, "-De"], "ports": [{"containerPort": 2222}]}, None),
    "named-port-invalid-falls-back-to-command": (
        {"command": [SSHD, "-p", "3333"], "ports": [{"name": "ssh", "containerPort": "2222"}]},
        3333,
    ),
    "no-command": ({}, None),
    "command-as-a-string-is-no-argv": ({"command": "/usr/sbin/sshd -p 2222"}, None),
}


@pytest.mark.parametrize(("container", "port"), list(CONTAINERS.values()), ids=list(CONTAINERS))
def test_container_ssh_port(container: dict[str, Any], port: int | None) -> None:
    assert container_ssh_port({"name": "worker", "image": "img", **container}) == port


@pytest.mark.parametrize(
    ("ports", "port"),
    [
        (None, None),
        ([], None),
        ([{"name": "ssh", "containerPort": 2222}], 2222),
        ([{"name": "http", "containerPort": 80}, {"name": "ssh", "containerPort": 22}], 22),
        ([{"name": "ssh", "containerPort": True}], None),
        ([{"name": "ssh", "containerPort": 0}], None),
        ([{"name": "ssh", "containerPort": 70000}], None),
        ([{"name": "ssh"}], None),
        (["ssh"], None),
        ([{"name": "SSH", "containerPort": 2222}], None),  # port names are case-sensitive
    ],
)
def test_named_ssh_port(ports: Any, port: int | None) -> None:
    assert named_ssh_port({"ports": ports}) == port


# --- properties -----------------------------------------------------------------------------------

words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
sshd_like = st.sampled_from(
    ["-p", "-o", "-D", "-De", "-p2222", "Port=2222", "sshd", SSHD, "sh", "-c", "--"]
)
argvs = st.lists(words | sshd_like, max_size=10)


@SETTINGS
@given(argvs, st.lists(words | sshd_like, max_size=4))
def test_total_and_never_out_of_range(command: list[str], args: list[str]) -> None:
    port = container_ssh_port({"command": command, "args": args})
    assert port is None or 1 <= port <= 65535


@SETTINGS
@given(argvs, st.integers(1, 65535))
def test_the_named_port_always_wins(argv: list[str], port: int) -> None:
    container = {"command": argv, "ports": [{"name": "ssh", "containerPort": port}]}
    assert container_ssh_port(container) == port


@dataclass(frozen=True)
class Invocation:
    """A generated sshd command line and the port it must yield, computed by a model independent of
    the parser: the first ListenAddress with a port, else the first -p, else the first -o Port."""

    arguments: tuple[str, ...]
    port: int | None


ports = st.integers(1, 65535)
flags = st.text(st.sampled_from("Deq"), max_size=3)


@st.composite
def invocations(draw: st.DrawFn) -> Invocation:
    arguments: list[str] = []
    listen: list[int] = []
    flag: list[int] = []
    config: list[int] = []
    kinds = st.sampled_from(["flags", "p", "port", "listen", "listen-any", "other"])
    for kind in draw(st.lists(kinds, max_size=8)):
        cluster = draw(flags)
        if kind == "flags":
            arguments.append(f"-{cluster or 'D'}")
        elif kind == "p":
            port = draw(ports)
            flag.append(port)
            arguments.extend(
                draw(st.sampled_from([[f"-{cluster}p", str(port)], [f"-{cluster}p{port}"]]))
            )
        elif kind == "port":
            port = draw(ports)
            config.append(port)
            keyword = "".join(draw(st.sampled_from([ch.lower(), ch.upper()])) for ch in "port")
            value = draw(
                st.sampled_from([f"{keyword}={port}", f"{keyword} {port}", f"{keyword} = {port}"])
            )
            arguments.extend(draw(st.sampled_from([["-o", value], [f"-o{value}"]])))
        elif kind == "listen":
            port = draw(ports)
            listen.append(port)
            address = draw(
                st.sampled_from([f"0.0.0.0:{port}", f"[::]:{port}", f"127.0.0.1:{port}"])
            )
            arguments.extend(["-o", f"ListenAddress {address}"])
        elif kind == "listen-any":
            arguments.extend(
                ["-o", f"ListenAddress={draw(st.sampled_from(['0.0.0.0', '::', '[::]']))}"]
            )
        else:
            arguments.extend(
                ["-o", draw(st.sampled_from(["StrictModes=no", "LogLevel ERROR", "UseDNS no"]))]
            )
    return Invocation(tuple(arguments), (listen or flag or config or [None])[0])


@SETTINGS
@given(invocations())
def test_generated_command_lines(invocation: Invocation) -> None:
    assert sshd_port(invocation.arguments) == invocation.port


wrappers = st.sampled_from(
    [
        lambda a: [SSHD, *a],
        lambda a: ["tini", "--", SSHD, *a],
        lambda a: ["/bin/sh", "-c", shlex.join([SSHD, *a])],
        lambda a: ["/bin/sh", "-c", "exec " + shlex.join([SSHD, *a])],
        lambda a: ["bash", "-ec", "mkdir -p /run/sshd\nexec " + shlex.join([SSHD, *a])],
        lambda a: ["sh", "-c", "mkdir -p /run/sshd && " + shlex.join([SSHD, *a]) + " 2>&1 | cat"],
        lambda a: ["sh", "-c", 'exec "$@"', "sh", SSHD, *a],
    ]
)


@SETTINGS
@given(invocations(), wrappers, st.booleans())
def test_wrappers_and_shell_quoting_do_not_change_the_port(
    invocation: Invocation, wrap: Any, split: bool
) -> None:
    argv = wrap(list(invocation.arguments))
    container = {"command": argv[:1], "args": argv[1:]} if split else {"command": argv}
    assert container_ssh_port(container) == invocation.port


@SETTINGS
@given(invocations(), st.sampled_from(["x", "0", "65536", "ssh", ""]))
def test_one_bad_port_makes_it_unknown(invocation: Invocation, bad: str) -> None:
    assert sshd_port([*invocation.arguments, "-p", bad]) is None


# --- sshd itself as the oracle --------------------------------------------------------------------


@dataclass(frozen=True)
class RealSshd:
    prefix: tuple[str, ...]
    config: Path
    host_key: Path


NOBODY = ("--reuid=65534", "--regid=65534", "--clear-groups")


@pytest.fixture(scope="module")
def real_sshd() -> Iterator[RealSshd]:
    """sshd -T as an unprivileged user (as root, sshd insists on its privilege separation
    directory)."""
    sshd, keygen = (
        shutil.which("sshd") or (SSHD if Path(SSHD).exists() else None),
        shutil.which("ssh-keygen"),
    )
    if sshd is None or keygen is None:
        pytest.skip("no OpenSSH sshd / ssh-keygen installed")
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv to drop privileges for sshd -T")
        prefix = (setpriv, *NOBODY)
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        root.chmod(0o777)
        key = root / "host_key"
        subprocess.run(
            [*prefix, keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
            check=True,
            timeout=30,
        )
        config = root / "sshd_config"
        config.write_text("Port 1022\n")  # a port from the file: one the parser can never know
        config.chmod(0o644)
        yield RealSshd((*prefix, sshd), config, key)


def _listening_ports(real: RealSshd, arguments: tuple[str, ...]) -> set[int] | None:
    done = subprocess.run(
        [*real.prefix, "-T", "-f", str(real.config), "-h", str(real.host_key), *arguments],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        return None
    return {
        int(line.rsplit(":", 1)[1])
        for line in done.stdout.splitlines()
        if line.startswith("listenaddress ")
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(invocations())
def test_sshd_listens_on_the_port_found(real_sshd: RealSshd, invocation: Invocation) -> None:
    port = sshd_port(invocation.arguments)
    listening = _listening_ports(real_sshd, invocation.arguments)
    assert listening is not None, invocation
    if port is None:
        assert 1022 in listening, (invocation, listening)  # only the config file says where
    else:
        assert port in listening, (invocation, listening)


@pytest.mark.parametrize(("arguments", "port"), list(ARGS.values()), ids=list(ARGS))
def test_the_table_agrees_with_sshd(
    real_sshd: RealSshd, arguments: list[str], port: int | None
) -> None:
    """Every port the table expects is one sshd listens on, for the same arguments (less what
    depends on the pod: another config file, a stray operand, a routing domain that must exist)."""
    if port is None or "-f" in arguments or any("rdomain" in a for a in arguments):
        return
    listening = _listening_ports(real_sshd, tuple(a for a in arguments if a != "stray"))
    assert listening is not None
    assert port in listening
