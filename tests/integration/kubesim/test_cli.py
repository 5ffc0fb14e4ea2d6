"""`mpi-operator sim` as users start it: prints address and kubeconfig, serves kubectl, exits 0 on
SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import sys
from pathlib import Path

import pytest

from kubesim.cli import settings_from_args


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_sim_command_serves_until_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    kubeconfig = tmp_path / "sim.kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mpi_operator",
        "sim",
        "--port",
        str(port),
        "--kubeconfig-out",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        lines: list[str] = []
        async with asyncio.timeout(20):
            while not any(line.startswith("export KUBECONFIG=") for line in lines):
                raw = await proc.stdout.readline()
                assert raw, f"sim exited early: {(await proc.communicate())[1].decode()}"
                lines.append(raw.decode().strip())
        assert f"http://127.0.0.1:{port}" in "\n".join(lines)
        assert f"export KUBECONFIG={kubeconfig}" in lines
        if shutil.which("kubectl"):
            env = {**os.environ, "HOME": str(tmp_path)}
            kubectl = await asyncio.create_subprocess_exec(
                "kubectl",
                f"--kubeconfig={kubeconfig}",
                f"--cache-dir={tmp_path / 'cache'}",
                "get",
                "namespaces",
                "-o",
                "name",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
            out, err = await asyncio.wait_for(kubectl.communicate(), 30)
            assert kubectl.returncode == 0, err.decode()
            assert "namespace/default" in out.decode().split()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_sim_flags_become_settings() -> None:
    args = argparse.Namespace(
        port=0,
        fault_rate=0.5,
        start_seconds=0.0,
        ready_seconds=None,
        volume_sync_seconds=None,
        node_monitor_grace_seconds=5.0,
    )
    settings = settings_from_args(args)
    assert (settings.fault_rate, settings.start_seconds, settings.ready_seconds) == (0.5, 0.0, 1.0)
    assert settings.node_monitor_grace_seconds == 5.0


def test_node_flags_shape_the_cluster(tmp_path: Path) -> None:
    def args(**flags: object) -> argparse.Namespace:
        return argparse.Namespace(
            **{"nodes": None, "node_allocatable": None, "cluster": None, **flags}
        )

    shapes = settings_from_args(
        args(nodes=3, node_allocatable="cpu=16,nvidia.com/gpu=4")
    ).node_shapes()
    assert [s.name for s in shapes] == ["kubesim-1", "kubesim-2", "kubesim-3"]
    assert shapes[0].allocatable == {"cpu": "16", "nvidia.com/gpu": "4", "pods": "110"}
    assert settings_from_args(args()).node_shapes()[0].unlimited

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("nodes: [{name: big, allocatable: {cpu: '64'}}]\n")
    assert [s.name for s in settings_from_args(args(cluster=str(cluster))).node_shapes()] == ["big"]
    with pytest.raises(ValueError, match="--cluster describes every node"):
        settings_from_args(args(cluster=str(cluster), nodes=2))
