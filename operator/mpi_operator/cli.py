"""The `mpi-operator` command line: `run`, `sim`, `demo`, `validate`, `generate`, `crds`.

Each subcommand's implementation lives in the module that owns it; this file only parses
arguments and dispatches, importing lazily so `mpi-operator validate` does not pay for aiohttp.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from mpi_operator.settings import Settings  # dataclasses only: cheap, and the flags' defaults come from it


def _not_implemented(name: str) -> int:
    print(f"mpi-operator {name}: not implemented yet", file=sys.stderr)
    return 2


def _cmd_crds(args: argparse.Namespace) -> int:
    from mpi_operator.api import crd

    return crd.main(out_dir=args.out)


def _cmd_validate(args: argparse.Namespace) -> int:
    from mpi_operator.api import manifests

    return manifests.validate_main(args.files, gpus_per_node=args.gpus_per_node)


def _cmd_demo(_args: argparse.Namespace) -> int:
    from mpi_operator import demo

    return demo.main()


def _cmd_sim(args: argparse.Namespace) -> int:
    try:
        from kubesim import cli as sim_cli
    except ImportError:
        return _not_implemented("sim")
    return sim_cli.main(args)


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
        max_workers_per_job=args.max_workers_per_job,
    )


def _cmd_run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        print("mpi-operator run: --workers must be at least 1", file=sys.stderr)
        return 2
    from mpi_operator.api.validation import worker_limit

    try:
        worker_limit(args.max_workers_per_job)
    except ValueError as exc:
        print(f"mpi-operator run: --max-workers-per-job {exc}", file=sys.stderr)
        return 2

    import asyncio
    import logging

    from mpi_operator.controller import logging as oplog
    from mpi_operator.controller import manager
    from mpi_operator.controller.reconciler import WATCH_SELECTORS, mpijob_reconciler_factory
    from mpi_operator.controller.types import FatalError

    settings = run_settings(args)
    oplog.setup(settings.log_format)
    log = logging.getLogger("mpi_operator.cli")
    try:
        asyncio.run(manager.run(settings, mpijob_reconciler_factory, selectors=WATCH_SELECTORS))
    except FatalError as exc:
        log.error("fatal: %s", exc)
        return 1
    except Exception:
        log.exception("fatal: unexpected error")
        return 1
    log.info("stopped")
    return 0


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
        help="client-side API requests per second (default: %(default)s)",
    )
    run.add_argument(
        "--burst",
        type=int,
        default=Settings.burst,
        help="burst of the client-side limit (default: %(default)s)",
    )
    run.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True)
    run.add_argument("--metrics-address", default="0.0.0.0:8080")
    run.add_argument("--cluster-domain", default="")
    run.add_argument("--gpus-per-node", type=int, default=1)
    run.add_argument("--gang-scheduling", choices=["volcano", "scheduler-plugins"])
    run.add_argument(
        "--max-workers-per-job",
        type=int,
        metavar="N",
        # No number here: the ceiling lives in api/constants.py, which this module does not load for --help.
        help="refuse MPIJobs with more than N workers (Invalid condition); may only lower the CRD's "
        "ceiling, which is the default (`mpi-operator run --max-workers-per-job 0` prints it)",
    )
    run.add_argument("--log-format", choices=["json", "text"], default="text")
    run.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE") or "mpi-operator",
        help="namespace of the leader-election Lease (default: $POD_NAMESPACE, else mpi-operator)",
    )
    run.set_defaults(func=_cmd_run)

    sim = sub.add_parser("sim", help="serve the embedded simulated Kubernetes API (kubesim)")
    sim.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0 picks a free one)")
    sim.add_argument("--kubeconfig-out", help="where to write a kubeconfig for kubectl and clients")
    sim.add_argument("--start-seconds", type=float, default=1.0, help="pod Pending -> Running delay")
    sim.add_argument("--ready-seconds", type=float, default=1.0, help="pod Running -> Ready delay")
    sim.add_argument(
        "--volume-sync-seconds", type=float, default=60.0, help="kubelet ConfigMap volume sync period"
    )
    sim.add_argument(
        "--fault-rate", type=float, default=0.0, help="fraction of writes failing with 500; drops watches"
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
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
