"""The `mpi-operator` command line (DESIGN.md §7).

Each subcommand's implementation lives in the module that owns it; this file only parses
arguments and dispatches, importing lazily so `mpi-operator validate` does not pay for aiohttp.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _not_implemented(name: str) -> int:
    print(f"mpi-operator {name}: not implemented yet", file=sys.stderr)
    return 2


def _cmd_crds(args: argparse.Namespace) -> int:
    from mpi_operator.api import crd

    return crd.main(out_dir=args.out)


def _cmd_validate(args: argparse.Namespace) -> int:
    from mpi_operator.api import manifests

    return manifests.validate_main(args.files, gpus_per_node=args.gpus_per_node)


def _cmd_sim(args: argparse.Namespace) -> int:
    try:
        from kubesim import cli as sim_cli
    except ImportError:
        return _not_implemented("sim")
    return sim_cli.main(args)


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
    run.add_argument("--qps", type=float, default=5.0)
    run.add_argument("--burst", type=int, default=10)
    run.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True)
    run.add_argument("--metrics-address", default="0.0.0.0:8080")
    run.add_argument("--cluster-domain", default="")
    run.add_argument("--gpus-per-node", type=int, default=1)
    run.add_argument("--gang-scheduling", choices=["volcano", "scheduler-plugins"])
    run.add_argument("--log-format", choices=["json", "text"], default="text")
    run.set_defaults(func=lambda _a: _not_implemented("run"))

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
    sim.set_defaults(func=_cmd_sim)

    demo = sub.add_parser("demo", help="run kubesim + the operator and scale an elastic job")
    demo.set_defaults(func=lambda _a: _not_implemented("demo"))

    crds = sub.add_parser("crds", help="print the MPIJob CustomResourceDefinition")
    crds.add_argument("--out", metavar="DIR", help="write crds/kubeflow.org_mpijobs.yaml under DIR")
    crds.set_defaults(func=_cmd_crds)

    validate = sub.add_parser("validate", help="check MPIJob manifests offline")
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML files ('-' for stdin)")
    validate.add_argument(
        "--gpus-per-node", type=int, default=1, help="v1alpha1 `gpus` split (operator default)"
    )
    validate.set_defaults(func=_cmd_validate)

    generate = sub.add_parser("generate", help="print an MPIJob manifest from a prototype")
    generate.add_argument("flavour", choices=["simple", "custom", "openmpi", "elastic"])
    generate.set_defaults(func=lambda _a: _not_implemented("generate"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
