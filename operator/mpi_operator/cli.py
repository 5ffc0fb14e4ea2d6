"""The `mpi-operator` command line: `run`, `sim`, `demo`, `validate`, `generate`, `crds`.

Each subcommand's implementation lives in the module that owns it; this file only parses
arguments and dispatches, importing lazily so `mpi-operator validate` does not pay for aiohttp.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import sys
from collections.abc import Callable, Sequence

from mpi_operator.settings import (  # dataclasses only: cheap, and the flags' defaults come from it
    FALLBACK_BURST,
    FALLBACK_QPS,
    Settings,
)

DISTRIBUTION = "elastic-mpi-operator"
SIM_EXTRA_HINT = f"pip install '{DISTRIBUTION}[sim]'"
_SIM_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*).*;.*\bextra\s*==\s*[\"']sim[\"']")


def missing_sim_requirements() -> list[str]:
    """The distributions of the `sim` extra that are not installed.

    Read from the installed package's metadata rather than found by importing kubesim, because kubesim
    imports some of them only when it first needs them (kubernetes-validate's schemas, dnslib): a demo
    would otherwise fail half-way. Empty when the package itself is not installed (a source tree on
    PYTHONPATH), where an import error is the only signal left.
    """
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    missing: list[str] = []
    for requirement in requires:
        match = _SIM_REQUIREMENT.match(requirement)
        if match is None:
            continue
        try:
            importlib.metadata.distribution(match.group(1))
        except importlib.metadata.PackageNotFoundError:
            missing.append(match.group(1))
    return missing


def _with_kubesim(command: str, run: Callable[[], int]) -> int:
    """Runs a command that needs kubesim, or says in one line what to install (exit 2)."""
    missing = missing_sim_requirements()
    if missing:
        print(
            f"mpi-operator {command} needs kubesim, whose dependencies are not installed "
            f"({', '.join(missing)}): {SIM_EXTRA_HINT}",
            file=sys.stderr,
        )
        return 2
    try:
        return run()
    except ModuleNotFoundError as exc:
        # Our own modules missing is a broken installation, not a missing extra: let it show.
        if exc.name is None or exc.name.split(".")[0] in ("mpi_operator", "kubesim", "mpi_discovery"):
            raise
        print(
            f"mpi-operator {command} needs kubesim, whose dependency {exc.name} is not installed: "
            f"{SIM_EXTRA_HINT}",
            file=sys.stderr,
        )
        return 2


def _cmd_crds(args: argparse.Namespace) -> int:
    from mpi_operator.api import crd

    return crd.main(out_dir=args.out)


def _cmd_validate(args: argparse.Namespace) -> int:
    from mpi_operator.api import manifests

    return manifests.validate_main(args.files, gpus_per_node=args.gpus_per_node)


def _cmd_demo(_args: argparse.Namespace) -> int:
    def run() -> int:
        from mpi_operator import demo

        return demo.main()

    return _with_kubesim("demo", run)


def _cmd_sim(args: argparse.Namespace) -> int:
    def run() -> int:
        from kubesim import cli as sim_cli

        return sim_cli.main(args)

    return _with_kubesim("sim", run)


def run_settings(args: argparse.Namespace) -> Settings:
    """The `run` flags as `Settings` (`--namespace ""` means all namespaces, as upstream)."""
    from mpi_operator.settings import Settings

    return Settings(
        namespaces=tuple(dict.fromkeys(ns for ns in args.namespace if ns)),
        kubeconfig=args.kubeconfig,
        workers=args.workers,
        qps=args.qps,
        burst=args.burst,
        leader_elect=args.leader_elect,
        lease_namespace=args.lease_namespace,
        metrics_address=args.metrics_address,
        log_format=args.log_format,
        cluster_domain=args.cluster_domain,
        gpus_per_node=args.gpus_per_node,
        gang_scheduling=args.gang_scheduling,
    )


def _cmd_run(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from mpi_operator.controller import logging as oplog
    from mpi_operator.controller import manager
    from mpi_operator.controller.reconciler import WATCH_SELECTORS, mpijob_reconciler_factory
    from mpi_operator.controller.server import parse_address
    from mpi_operator.controller.types import FatalError

    for flag, value in (("--workers", args.workers), ("--gpus-per-node", args.gpus_per_node)):
        if value < 1:
            print(f"mpi-operator run: {flag} must be at least 1", file=sys.stderr)
            return 2
    try:
        parse_address(args.metrics_address)
    except ValueError as exc:  # checked before any logging or connection, as argparse checks the rest
        print(f"mpi-operator run: {exc}", file=sys.stderr)
        return 2
    settings = run_settings(args)
    oplog.setup(settings.log_format)
    log = logging.getLogger("mpi_operator.cli")
    try:
        asyncio.run(manager.run(settings, mpijob_reconciler_factory, selectors=WATCH_SELECTORS))
    except FatalError as exc:
        # One line: a message can quote a multi-line parser error (a kubeconfig that is not YAML).
        log.error("fatal: %s", "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()))
        return 1
    except Exception:
        log.exception("fatal: unexpected error")
        return 1
    log.info("stopped")
    return 0


def _port(text: str) -> int:
    """A TCP port number, refused by argparse (usage, exit 2) when out of range."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is not in 0..65535")
    return port


def _seconds(text: str) -> float:
    """A duration in seconds: zero or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text}: must be zero or more seconds")
    return value


def _fraction(text: str) -> float:
    """A fraction from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not in 0..1")
    return value


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mpi-operator",
        description="Kubernetes operator for kubeflow.org MPIJobs with elastic Horovod.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the operator against a cluster")
    run.add_argument("--kubeconfig")
    run.add_argument("--namespace", action="append", default=[])
    run.add_argument("--workers", type=int, default=2)
    run.add_argument(
        "--qps",
        type=float,
        default=Settings.qps,
        help="client-side limit of API requests per second; zero or negative: none (default: none once "
        f"the API server shows it has API Priority and Fairness, {FALLBACK_QPS:g} before that or without it)",
    )
    run.add_argument(
        "--burst",
        type=int,
        default=Settings.burst,
        help=f"burst of the client-side limit (default: {FALLBACK_BURST})",
    )
    run.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True)
    run.add_argument("--metrics-address", default="0.0.0.0:8080")
    run.add_argument("--cluster-domain", default="")
    run.add_argument("--gpus-per-node", type=int, default=1)
    run.add_argument("--gang-scheduling", choices=["volcano", "scheduler-plugins"])
    run.add_argument("--log-format", choices=["json", "text"], default="text")
    run.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE") or "mpi-operator",
        help="namespace of the leader-election Lease (default: $POD_NAMESPACE, else mpi-operator)",
    )
    run.set_defaults(func=_cmd_run)

    sim = sub.add_parser("sim", help="serve the embedded simulated Kubernetes API (kubesim)")
    sim.add_argument("--port", type=_port, default=0, help="TCP port on 127.0.0.1 (0 picks a free one)")
    sim.add_argument("--kubeconfig-out", help="where to write a kubeconfig for kubectl and clients")
    sim.add_argument("--start-seconds", type=_seconds, default=1.0, help="pod Pending -> Running delay")
    sim.add_argument("--ready-seconds", type=_seconds, default=1.0, help="pod Running -> Ready delay")
    sim.add_argument(
        "--volume-sync-seconds", type=_seconds, default=60.0, help="kubelet ConfigMap volume sync period"
    )
    sim.add_argument(
        "--fault-rate", type=_fraction, default=0.0, help="fraction of writes failing with 500; drops watches"
    )
    sim.add_argument(
        "--runtime",
        choices=("timer", "process"),
        default="timer",
        help="what runs in a pod: simulated timers (default) or real programs in Linux namespaces (root)",
    )
    sim.add_argument(
        "--images",
        help="YAML file mapping image references to stand-in images (process runtime; default: none)",
    )
    sim.set_defaults(func=_cmd_sim)

    demo = sub.add_parser("demo", help="run kubesim + the operator and scale an elastic job")
    demo.set_defaults(func=_cmd_demo)

    crds = sub.add_parser("crds", help="print the MPIJob CustomResourceDefinition")
    crds.add_argument("--out", metavar="DIR", help="write crds/kubeflow.org_mpijobs.yaml under DIR")
    crds.set_defaults(func=_cmd_crds)

    validate = sub.add_parser("validate", help="check MPIJob manifests offline")
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML files ('-' for stdin)")
    validate.add_argument(
        "--gpus-per-node", type=int, default=1, help="v1alpha1 `gpus` split (operator default)"
    )
    validate.set_defaults(func=_cmd_validate)

    from mpi_operator import generate_cli  # pydantic and PyYAML load only when `generate` runs

    generate_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:  # Ctrl-C on `demo` or `validate -`: the user's stop, not a crash
        print(f"mpi-operator {args.command}: interrupted", file=sys.stderr)
        return 130
    return result


if __name__ == "__main__":
    raise SystemExit(main())
