"""Checks of what scripts/setup_mpi.sh installs: the MPIs run the pi example, the images' ssh
configurations are accepted by the real sshd and ssh, and the image files have an image's owners and
modes. Everything runs on this machine only (no hostfile, no ssh connection); the checks that switch
user or mount things need root."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import mpi_images
from .mpi_images import (
    IMAGES,
    IMPI,
    MPICH,
    MPIUSER_GID,
    MPIUSER_UID,
    OPENMPI,
    ROOT,
    catalog,
    intel_env,
    missing,
    mpich_env,
    openmpi_env,
)

MISSING = missing()
IS_ROOT = os.geteuid() == 0
installed = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (user switch, mount namespace)")

PI_LINE = "pi is approximately 3.1410376000000002"
"""What upstream's pi program prints for 2 ranks."""
TIMEOUT = 60
AS_MPIUSER = ["setpriv", f"--reuid={MPIUSER_UID}", f"--regid={MPIUSER_GID}", "--clear-groups"]


def run(
    argv: list[str], *, env: dict[str, str] | None = None, cwd: str | Path = "/"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    return proc.stdout


# --- the catalog -------------------------------------------------------------------------------


def test_catalog_maps_upstream_images() -> None:
    images = catalog()
    for ref, name, entrypoint in [
        ("mpioperator/mpi-pi:openmpi", "openmpi", ()),
        ("mpioperator/openmpi", "openmpi", ()),
        ("mpioperator/openmpi:latest", "openmpi", ()),
        ("docker.io/mpioperator/mpi-pi:mpich", "mpich", ("/entrypoint.sh",)),
        ("mpioperator/mpich", "mpich", ("/entrypoint.sh",)),
        ("mpioperator/mpi-pi:intel", "intel", ("/entrypoint.sh",)),
        ("mpioperator/intel:latest", "intel", ("/entrypoint.sh",)),
        ("mpioperator/base", "base", ()),
    ]:
        spec = images.get(ref)
        assert spec.root == IMAGES / name, ref
        assert spec.entrypoint == entrypoint, ref
        assert spec.cmd == ("bash",), ref
        assert spec.working_dir == "/home/mpiuser", ref
        assert spec.passwd == ("mpiuser:x:1000:1000::/home/mpiuser:/bin/sh",), ref
        assert spec.group == ("mpiuser:x:1000:",), ref
    assert (
        images.get("mpioperator/mpi-pi:openmpi").root != images.get("mpioperator/mpi-pi:mpich").root
    )
    assert images.get("busybox").root is None

    env = dict(images.get("mpioperator/mpi-pi:openmpi").env)
    assert env["PATH"].startswith(f"{OPENMPI}/bin:")
    env = dict(images.get("mpioperator/mpi-pi:mpich").env)
    assert env["PATH"].startswith(f"{MPICH}/bin:")
    env = dict(images.get("mpioperator/mpi-pi:intel").env)
    assert env["PATH"].startswith(f"{IMPI}/bin:")
    assert env["LD_LIBRARY_PATH"] == f"{IMPI}/lib:{IMPI}/lib/libfabric"
    assert env["FI_PROVIDER_PATH"] == f"{IMPI}/lib/libfabric/prov"
    assert env["I_MPI_ROOT"] == str(IMPI)


# --- pi with each MPI, 2 ranks on this machine -------------------------------------------------


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A working and temporary directory that the pod user can write too."""
    with tempfile.TemporaryDirectory(prefix="mpi-pi-") as d:
        if IS_ROOT:
            os.chown(d, MPIUSER_UID, MPIUSER_GID)
        yield Path(d)


def mpi_env(mpi: str) -> dict[str, str]:
    if mpi == "openmpi":
        return openmpi_env()
    if mpi == "mpich":
        return mpich_env()
    env = intel_env()
    if mpi == "intel-shm":
        env["I_MPI_FABRICS"] = "shm"
    else:  # ranks talk through libfabric's tcp provider, pinned to loopback
        env.update(I_MPI_FABRICS="ofi", FI_PROVIDER="tcp", FI_TCP_IFACE="lo")
    return env


@installed
@pytest.mark.parametrize("user", ["self", "mpiuser"])
@pytest.mark.parametrize("mpi", ["openmpi", "mpich", "intel-shm", "intel-ofi"])
def test_pi_runs_on_two_local_ranks(mpi: str, user: str, scratch: Path) -> None:
    image = mpi.split("-")[0]
    env = {**mpi_env(mpi), "HOME": str(scratch), "TMPDIR": str(scratch)}
    argv = ["mpirun", "-n", "2", str(IMAGES / image / "home" / "mpiuser" / "pi")]
    if user == "mpiuser":
        if not IS_ROOT:
            pytest.skip("needs root to run as uid 1000")
        argv = AS_MPIUSER + argv
    elif IS_ROOT and mpi == "openmpi":
        # Open MPI refuses root unless both are set (or --allow-run-as-root is given).
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # env has the image's PATH: `mpirun` is that MPI's launcher, as in the pod.
    out = ok(run(argv, env=env, cwd=scratch))

    host = socket.gethostname()
    assert sorted(out.splitlines()) == sorted(
        ["Workers: 2", f"Rank 0 on host {host}", f"Rank 1 on host {host}", PI_LINE]
    )


@installed
@pytest.mark.parametrize(
    ("image", "mpi"), [("openmpi", OPENMPI), ("mpich", MPICH), ("intel", MPICH)]
)
def test_pi_binary_is_linked_against_its_mpi(image: str, mpi: Path) -> None:
    pi = (IMAGES / image / "home" / "mpiuser" / "pi").read_bytes()
    assert pi.startswith(b"\x7fELF")
    assert f"{mpi}/lib".encode() in pi  # the RUNPATH mpicxx adds
    assert pi == (mpi / "share" / "pi" / "pi").read_bytes()


# --- ssh configurations ------------------------------------------------------------------------


def effective(config_dump: str) -> dict[str, list[str]]:
    """`sshd -T` / `ssh -G` output: keyword -> values (some keywords repeat)."""
    found: dict[str, list[str]] = {}
    for line in config_dump.splitlines():
        key, _, value = line.partition(" ")
        found.setdefault(key, []).append(value)
    return found


@installed
@pytest.mark.parametrize("image", ["base", "openmpi", "mpich", "intel"])
def test_ssh_client_config(image: str) -> None:
    conf = effective(
        ok(run(["ssh", "-G", "-F", str(IMAGES / image / "etc/ssh/ssh_config"), "w-0.pi"]))
    )
    assert conf["port"] == ["2222"]
    assert conf["stricthostkeychecking"] == ["false"]
    assert conf["userknownhostsfile"] == ["/dev/null"]


@installed
@needs_root
@pytest.mark.parametrize("image", ["base", "openmpi", "mpich", "intel"])
def test_root_sshd_accepts_image_config(image: str) -> None:
    """sshd as root (the e2e tests' default worker command `/usr/sbin/sshd -De`) with the image's
    /etc/ssh/sshd_config and its /run/sshd (the privilege separation directory)."""
    root = IMAGES / image
    script = 'mount --bind "$1/run" /run && exec /usr/sbin/sshd -T -f "$1/etc/ssh/sshd_config"'
    conf = effective(
        ok(
            run(
                [
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "--",
                    "sh",
                    "-c",
                    script,
                    "sh",
                    str(root),
                ]
            )
        )
    )
    assert conf["port"] == ["2222"]
    assert conf["strictmodes"] == ["no"]
    assert conf["permitrootlogin"] == ["without-password"]  # Debian's default: root may use a key
    assert conf["hostkey"]
    for key in conf["hostkey"]:
        assert Path(key).is_file(), key


@installed
@needs_root
@pytest.mark.parametrize("image", ["base", "openmpi", "mpich", "intel"])
def test_mpiuser_sshd_accepts_home_config(image: str, tmp_path: Path) -> None:
    """sshd as uid 1000 with `-f /home/mpiuser/.sshd_config` (upstream's example workers): the host
    key is the job's key, mounted from the Secret (root-owned, mode 0644)."""
    key = tmp_path / "id_rsa"
    ok(run(["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-f", str(key)]))
    key.chmod(0o644)
    script = """set -eu
mount -t tmpfs -o mode=0755 tmpfs /home
cp -a "$1/home/mpiuser" /home/
mkdir /home/mpiuser/.ssh
cp "$2/id_rsa" "$2/id_rsa.pub" /home/mpiuser/.ssh/
cp "$2/id_rsa.pub" /home/mpiuser/.ssh/authorized_keys
shift 2
exec "$@"
"""
    argv = [
        *("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"),
        *(str(IMAGES / image), str(tmp_path)),
        *AS_MPIUSER,
        *("/usr/sbin/sshd", "-T", "-f", "/home/mpiuser/.sshd_config"),
    ]
    conf = effective(ok(run(argv)))
    assert conf["port"] == ["2222"]
    assert conf["hostkey"] == ["/home/mpiuser/.ssh/id_rsa"]
    assert conf["pidfile"] == ["/home/mpiuser/sshd.pid"]
    assert conf["strictmodes"] == ["no"]
    assert conf["usepam"] == ["no"]
    assert conf["authorizedkeysfile"] == [".ssh/authorized_keys .ssh/authorized_keys2"]


# --- /entrypoint.sh (mpich, intel) -------------------------------------------------------------


@pytest.fixture
def stubs(tmp_path: Path) -> Path:
    """`nslookup` and `sleep` stand-ins that log their arguments to $CALLS instead of doing it;
    `nslookup` fails for names starting with `bad-`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nslookup").write_text(
        '#!/bin/sh\necho "nslookup $*" >>"$CALLS"\ncase "$1" in bad-*) exit 1 ;; esac\necho "Name: '
        '$1"\n'
    )
    (bin_dir / "sleep").write_text('#!/bin/sh\necho "sleep $*" >>"$CALLS"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return bin_dir


def stub_env(stubs: Path, role: str) -> dict[str, str]:
    return {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "CALLS": str(stubs.parent / "calls"),
        "K_MPI_JOB_ROLE": role,
        "HOSTNAME": "pi-launcher",
    }


@installed
@pytest.mark.parametrize("image", ["mpich", "intel"])
def test_entrypoint_execs_the_command(image: str, stubs: Path) -> None:
    proc = run(
        [str(IMAGES / image / "entrypoint.sh"), "printf", "%s|", "a b", "c"],
        env=stub_env(stubs, "worker"),
    )
    assert ok(proc) == "a b|c|"
    assert not (stubs.parent / "calls").exists()  # only the launcher waits for DNS


@installed
@needs_root
@pytest.mark.parametrize("image", ["mpich", "intel"])
def test_entrypoint_launcher_waits_for_hostfile_names(image: str, stubs: Path) -> None:
    """The launcher looks up its own name and each hostfile host (both line formats), retrying a
    failing name 10 times with a doubling wait from 0.1 s, then reports it and goes on."""
    upper = stubs.parent / "upper"
    (upper / "mpi").mkdir(parents=True)
    (stubs.parent / "work").mkdir()
    (upper / "mpi" / "hostfile").write_text(
        "pi-worker-0.pi.default.svc:1\n\npi-worker-1.pi.default.svc slots=1\nbad-host:1"
    )
    # /etc/mpi/hostfile appears in an overlay of /etc seen by this process only.
    script = (
        'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc'
        ' && shift && exec "$@"'
    )
    argv = [
        *("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"),
        *(str(stubs.parent), str(IMAGES / image / "entrypoint.sh"), "echo", "started"),
    ]
    out = ok(run(argv, env=stub_env(stubs, "launcher")))
    assert out == "Couldn't resolve bad-host\nstarted\n"

    waits = [f"{0.1 * 2**i:.3f}" for i in range(10)]
    expected = [
        "nslookup pi-launcher",
        "nslookup pi-worker-0.pi.default.svc",
        "nslookup pi-worker-1.pi.default.svc",
    ]
    for wait in waits:
        expected += ["nslookup bad-host", f"sleep {wait}"]
    assert (stubs.parent / "calls").read_text().splitlines() == expected


# --- files, owners, modes ----------------------------------------------------------------------


def mode_of(path: Path) -> tuple[int, int, int]:
    st = path.lstat()
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


@installed
@pytest.mark.parametrize("image", ["base", "openmpi", "mpich", "intel"])
def test_image_files(image: str) -> None:
    root = IMAGES / image
    assert mode_of(root / "etc/ssh/ssh_config") == (0, 0, 0o644)
    assert mode_of(root / "etc/ssh/sshd_config") == (0, 0, 0o644)
    assert mode_of(root / "run/sshd") == (0, 0, 0o755)
    assert mode_of(root / "home") == (0, 0, 0o755)
    assert mode_of(root / "home/mpiuser") == (MPIUSER_UID, MPIUSER_GID, 0o755)
    assert mode_of(root / "home/mpiuser/.sshd_config") == (MPIUSER_UID, MPIUSER_GID, 0o644)
    assert (root / "home/mpiuser/.sshd_config").read_text().split("\n")[-5:] == [
        "PidFile /home/mpiuser/sshd.pid",
        "HostKey /home/mpiuser/.ssh/id_rsa",
        "StrictModes no",
        "Port 2222",
        "",
    ]
    assert not (root / "home/mpiuser/.ssh").exists()  # the Secret is mounted there
    if image == "base":
        assert not (root / "home/mpiuser/pi").exists()
    else:
        assert mode_of(root / "home/mpiuser/pi") == (0, 0, 0o755)
    if image in ("mpich", "intel"):
        assert mode_of(root / "entrypoint.sh") == (0, 0, 0o755)
    else:
        assert not (root / "entrypoint.sh").exists()


@installed
def test_install_is_readable_by_pods() -> None:
    """Pods run as uid 1000: everything must be readable (and directories searchable) by others,
    and nothing writable by anyone but its owner."""
    bad: list[str] = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                continue
            mode = stat.S_IMODE(st.st_mode)
            needed = 0o005 if stat.S_ISDIR(st.st_mode) else 0o004
            if mode & needed != needed or mode & 0o022:
                bad.append(f"{path} {mode:o}")
    assert not bad, bad[:20]
    for mpi in (OPENMPI, MPICH, IMPI):
        python = mpi / "bin" / "python"  # on PATH in the pod: must not point into /root
        assert os.access(python.resolve(), os.X_OK)
        assert not str(python.resolve()).startswith("/root/")


def test_a_root_under_a_directory_every_container_mounts_afresh_is_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mpi_images, "ROOT", Path("/tmp/mpi"))
    assert mpi_images.missing() == (
        "KUBESIM_MPI_ROOT cannot be used: /tmp/mpi is under /tmp, which every container of the "
        "process "
        "runtime mounts afresh, so the pods would not see the MPI venvs"
    )
