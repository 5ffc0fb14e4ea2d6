"""The `mpi-operator` command line: `run`, `sim`, `demo`, `validate`, `generate`, `crds`.

Each subcommand's implementation lives in the module that owns it; this file only parses
arguments and dispatches, importing lazily so `mpi-operator validate` does not pay for aiohttp.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from collections.abc import Callable, Sequence

from mpi_operator import runflags  # argparse and the settings dataclass only: cheap
from mpi_operator.settings import Settings

DISTRIBUTION = "elastic-mpi-operator"
SIM_EXTRA_HINT = f"pip install '{DISTRIBUTION}[sim]'"
_SIM_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*).*;.*\bextra\s*==\s*[\"']sim[\"']")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def missing_sim_requirements() -> list[str]:
    """The distributions of the `sim` extra that are not installed.

    Read from the installed package's metadata rather than found by importing kubesim, because
    kubesim imports some of them only when it first needs them (kubernetes-validate's schemas,
    dnslib): a demo would otherwise fail half-way. Empty when the package itself is not installed (a
    source tree on PYTHONPATH), where an import error is the only signal left.
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
            found = importlib.metadata.distribution(match.group(1))
        except importlib.metadata.PackageNotFoundError:
            missing.append(match.group(1))
            continue
        # The extra is kubesim, a distribution of its own: its dependencies count too.
        for dependency in found.requires or []:
            name = _REQUIREMENT_NAME.match(dependency)
            if name is None or ";" in dependency:
                continue
            try:
                importlib.metadata.distribution(name.group(1))
            except importlib.metadata.PackageNotFoundError:
                missing.append(name.group(1))
    return missing


def _with_kubesim(command: str, run: Callable[[], int]) -> int:
    """Runs a command that needs kubesim, or says in one line what to install (exit 2)."""
    missing = missing_sim_requirements()
    if missing:
        print(
            f"mpi-operator {command} needs kubesim, which is not installed with its dependencies "
            f"({', '.join(missing)}): {SIM_EXTRA_HINT}",
            file=sys.stderr,
        )
        return 2
    try:
        return run()
    except ModuleNotFoundError as exc:
        # Our own modules missing is a broken installation, not a missing extra: let it show.
        if exc.name is None or exc.name.split(".")[0] in (
            "mpi_operator",
            "kubesim",
            "mpi_discovery",
        ):
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

    return manifests.validate_main(
        args.files,
        gpus_per_node=args.gpus_per_node,
        max_workers=args.max_workers_per_job,
        field_validation=args.validate,
        allow_empty=args.allow_empty,
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    def run() -> int:
        if args.scene == "shared-cluster":
            from mpi_operator import demo_cluster

            return demo_cluster.main()
        from mpi_operator import demo

        return demo.main()

    return _with_kubesim("demo", run)


def _cmd_sim(args: argparse.Namespace) -> int:
    def run() -> int:
        from kubesim import cli as sim_cli

        return sim_cli.main(args)

    return _with_kubesim("sim", run)


def run_settings(args: argparse.Namespace) -> Settings:
    """The `run` flags (and `MPI_OPERATOR_*` variables) as `Settings`; raises
    `runflags.FlagError`."""
    return runflags.settings(args)


def _cmd_run(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from mpi_operator.reconcile.reconciler import WATCH_SELECTORS, mpijob_reconciler_factory
    from mpi_operator.runtime import logging as oplog
    from mpi_operator.runtime import manager
    from mpi_operator.runtime.server import parse_address
    from mpi_operator.runtime.tuning import loop_factory, tune_memory
    from mpi_operator.runtime.types import FatalError

    try:  # checked before any logging or connection, as argparse checks the rest
        settings = run_settings(args)
        parse_address(settings.metrics_address)
    except ValueError as exc:  # FlagError too
        print(f"mpi-operator run: {exc}", file=sys.stderr)
        return 2
    oplog.setup(
        settings.log_format, level=logging.getLevelNamesMapping()[settings.log_level.upper()]
    )
    log = logging.getLogger("mpi_operator.cli")
    if notice := runflags.klog_notice(args):
        log.info("%s", notice)
    tune_memory()
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(manager.run(settings, mpijob_reconciler_factory, selectors=WATCH_SELECTORS))
    except FatalError as exc:
        # One line: a message can quote a multi-line parser error (a kubeconfig that is not YAML).
        log.error(
            "fatal: %s", "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        )
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
    parser.add_argument(
        "--version", action="version", version=runflags.version_text(), help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run the operator against a cluster",
        description="Run the operator. Takes upstream's flags too, with one dash or two (Go's "
        "syntax), "
        "and ignores klog's flags but -v; every flag's MPI_OPERATOR_* variable is its default.",
        allow_abbrev=False,  # as Go's flag package: `--thread` must not pass for `--threadiness`
    )
    runflags.add_flags(run)
    run.set_defaults(func=_cmd_run)

    port, seconds, fraction = (
        runflags.port,
        runflags.seconds,
        runflags.fraction,
    )  # FlagErrors read well
    sim = sub.add_parser("sim", help="serve the embedded simulated Kubernetes API (kubesim)")
    sim.add_argument(
        "--port", type=port, default=0, help="TCP port on 127.0.0.1 (0 picks a free one)"
    )
    sim.add_argument("--kubeconfig-out", help="where to write a kubeconfig for kubectl and clients")
    sim.add_argument(
        "--start-seconds", type=seconds, default=1.0, help="pod Pending -> Running delay"
    )
    sim.add_argument(
        "--ready-seconds", type=seconds, default=1.0, help="pod Running -> Ready delay"
    )
    sim.add_argument(
        "--volume-sync-seconds",
        type=seconds,
        default=60.0,
        help="kubelet ConfigMap volume sync period",
    )
    sim.add_argument(
        "--fault-rate",
        type=fraction,
        default=0.0,
        help="fraction of writes failing with 500; drops watches",
    )
    sim.add_argument(
        "--runtime",
        choices=("timer", "process"),
        default="timer",
        help="what runs in a pod: simulated timers (default) or real programs in Linux namespaces "
        "(root)",
    )
    sim.add_argument(
        "--images",
        help="YAML file mapping image references to stand-in images (process runtime; default: "
        "none)",
    )
    sim.add_argument(
        "--nodes",
        type=int,
        help="run N nodes kubesim-1..N with --node-allocatable each (default: one node that never "
        "fills)",
    )
    sim.add_argument(
        "--node-allocatable",
        help="what each of --nodes offers, e.g. cpu=16,memory=64Gi,nvidia.com/gpu=4 (pods: 110)",
    )
    sim.add_argument(
        "--gpu-replicas",
        type=int,
        help="share each GPU of --nodes R ways, as the NVIDIA device plugin's time-slicing "
        "(replicas: R): a node advertises its nvidia.com/gpu times R (default 1)",
    )
    sim.add_argument(
        "--cluster",
        help="YAML file of the nodes: nodes: [{name, labels, taints, allocatable, gpuReplicas}] "
        "(docs/kubesim.md)",
    )
    sim.add_argument(
        "--node-monitor-grace-seconds",
        type=seconds,
        default=40.0,
        help="how long a node's kubelet may be silent before the node is NotReady (default 40)",
    )
    sim.set_defaults(func=_cmd_sim)

    demo = sub.add_parser("demo", help="run kubesim + the operator and scale an elastic job")
    demo.add_argument(
        "--scene",
        choices=("scale", "shared-cluster"),
        default="scale",
        help="scale: an elastic job scaled out and in (default); shared-cluster: 3 nodes with "
        "GPUs, preemption by a high-priority job, a drain stopped by the job's disruption budget",
    )
    demo.set_defaults(func=_cmd_demo)

    crds = sub.add_parser("crds", help="print the MPIJob CustomResourceDefinition")
    crds.add_argument("--out", metavar="DIR", help="write crds/kubeflow.org_mpijobs.yaml under DIR")
    crds.set_defaults(func=_cmd_crds)

    validate = sub.add_parser("validate", help="check MPIJob manifests offline")
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML files ('-' for stdin)")
    validate.add_argument(
        "--gpus-per-node", type=int, default=1, help="v1alpha1 `gpus` split (operator default)"
    )
    validate.add_argument(
        "--max-workers-per-job",
        metavar="N",
        type=runflags.max_workers,
        default=runflags.max_workers(None),
        help="the operator's --max-workers-per-job: refuse jobs with more workers (default: the "
        "ceiling)",
    )
    validate.add_argument(
        "--validate",
        choices=("strict", "warn", "ignore"),
        default="strict",
        help="unknown fields: errors (strict, kubectl apply's default), warnings, or ignored",
    )
    validate.add_argument(
        "--allow-empty",
        action="store_true",
        help="a file (or stdin) without any MPIJob passes instead of failing",
    )
    validate.set_defaults(func=_cmd_validate)

    from mpi_operator import generate_cli  # pydantic and PyYAML load only when `generate` runs

    generate_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:  # Go's one-dash flags, as upstream's manifests pass them
        argv = ["run", *runflags.go_style(argv[1:])]
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:  # Ctrl-C on `demo` or `validate -`: the user's stop, not a crash
        print(f"mpi-operator {args.command}: interrupted", file=sys.stderr)
        return 130
    return result


if __name__ == "__main__":
    raise SystemExit(main())
