"""The two host lists the launcher reads: MPI's `hostfile` and Horovod's `discover_hosts.sh`.

Both formats, rendered and parsed, with the standard library only (the launcher image runs it too).
`hostfile` is upstream's: `<host> slots=<n>` for Open MPI, `<host>:<n>` for Intel MPI and MPICH.
`discover_hosts.sh` is a `#!/bin/sh` script printing one `<host>:<slots>` line per host, and nothing
for zero hosts. Horovod treats every distinct string as a host
(docs/architecture.md#the-elastic-state-machine), so host names are validated as DNS names before
they are written: nothing that reaches `/bin/sh` needs quoting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

OPENMPI: Final = "OpenMPI"
INTEL: Final = "Intel"
MPICH: Final = "MPICH"
IMPLEMENTATIONS: Final = (OPENMPI, INTEL, MPICH)

SHEBANG: Final = "#!/bin/sh\n"
DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_ECHO_LINE = re.compile(r"^echo ([^\s:]+)(?::([0-9]+))?$")

Host = tuple[str, int]
"""A host name and its MPI slots."""


def is_dns_name(host: str) -> bool:
    """Whether `host` is a DNS-1123 subdomain (lower-case labels of `[a-z0-9-]`, dot-separated, ≤
    253)."""
    if not host or len(host) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        return False
    return all(_LABEL.match(label) for label in host.split("."))


def check_host(host: str, slots: int) -> Host:
    """`(host, slots)` unchanged, or ValueError when either could corrupt a hostfile or a shell
    script."""
    if not isinstance(host, str) or not is_dns_name(host):
        raise ValueError(f"host {host!r} is not a DNS-1123 subdomain")
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
        raise ValueError(f"slots of {host} must be a non-negative integer, not {slots!r}")
    return host, slots


def _check_implementation(implementation: str) -> None:
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(
            f"unknown MPI implementation {implementation!r}; expected one of {IMPLEMENTATIONS}"
        )


def render_hostfile_line(host: str, slots: int, implementation: str = OPENMPI) -> str:
    """One hostfile line, newline included: `h slots=N` (Open MPI) or `h:N` (Intel MPI, MPICH)."""
    _check_implementation(implementation)
    check_host(host, slots)
    if implementation == OPENMPI:
        return f"{host} slots={slots}\n"
    return f"{host}:{slots}\n"


def render_hostfile(hosts: Iterable[Host], implementation: str = OPENMPI) -> str:
    """The whole hostfile, in the given order; the empty string for no hosts (as upstream)."""
    return "".join(render_hostfile_line(host, slots, implementation) for host, slots in hosts)


def parse_hostfile(text: str) -> list[Host]:
    """`(host, slots)` per line of either format; blank lines and `#` comments are skipped.

    A line without a slot count (`host` alone) means one slot, as in Open MPI and Hydra.
    """
    hosts: list[Host] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "slots=" in line:
            host, _, rest = line.partition(" ")
            slots_word = next(w for w in rest.split() if w.startswith("slots="))
            hosts.append(check_host(host, int(slots_word.removeprefix("slots="))))
        elif ":" in line:
            host, _, slots_text = line.partition(":")
            hosts.append(check_host(host, int(slots_text)))
        else:
            hosts.append(check_host(line, 1))
    return hosts


def render_discovery_output(hosts: Sequence[Host]) -> str:
    """What the discovery script prints: `host:slots` lines in the given order (empty for no
    hosts)."""
    return "".join(f"{host}:{slots}\n" for host, slots in (check_host(h, s) for h, s in hosts))


def render_discover_hosts(hosts: Sequence[Host]) -> str:
    """A `#!/bin/sh` script that prints exactly `render_discovery_output(hosts)`.

    Each host is one `echo host:slots` line, upstream's layout plus the slots Horovod needs without
    `--slots-per-host`. Duplicate host names are refused: Horovod would keep one of them at random.
    """
    seen: set[str] = set()
    lines = [SHEBANG]
    for host, slots in hosts:
        check_host(host, slots)
        if host in seen:
            raise ValueError(f"host {host} listed twice")
        seen.add(host)
        lines.append(f"echo {host}:{slots}\n")
    return "".join(lines)


def parse_discovery_output(stdout: str) -> dict[str, int]:
    """Horovod's reading of a discovery script's stdout, strict: `{host: slots}`, ValueError on bad
    lines.

    Horovod itself (`HostDiscoveryScript.find_available_hosts_and_slots`) tolerates some junk that
    would silently rename hosts; the operator's own output must never need that tolerance.
    """
    found: dict[str, int] = {}
    for line in stdout.strip().split("\n"):
        if not line:
            continue
        host, sep, slots_text = line.partition(":")
        if not sep or not slots_text.isdigit():
            raise ValueError(f"discovery line {line!r} is not host:slots")
        found[check_host(host, int(slots_text))[0]] = int(slots_text)
    return found


def parse_discover_hosts(script: str) -> list[Host]:
    """The hosts a script rendered by `render_discover_hosts` prints, without running it.

    Upstream's bare `echo host` lines (no slots) count as one slot each.
    """
    lines = script.splitlines()
    if not lines or lines[0] + "\n" != SHEBANG:
        raise ValueError("discover_hosts.sh must start with #!/bin/sh")
    hosts: list[Host] = []
    for line in lines[1:]:
        match = _ECHO_LINE.match(line)
        if match is None:
            raise ValueError(f"unexpected line in discover_hosts.sh: {line!r}")
        slots = int(match.group(2)) if match.group(2) is not None else 1
        hosts.append(check_host(match.group(1), slots))
    return hosts
