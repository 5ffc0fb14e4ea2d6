"""The `mpi-operator generate` command line: flags per flavour -> `mpi_operator.generate` -> YAML on
stdout.

Exit status 0 with the manifest on stdout; 2 with `error: --flag: why` on stderr (argparse's own
errors, such as a missing `--name` or a non-integer, exit 2 too) and nothing on stdout.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Final

from mpi_operator.generate import (
    DEFAULT_ELASTIC_SCRIPT,
    CommonOptions,
    GenerateError,
    custom,
    elastic,
    openmpi,
    simple,
)

DEFAULT_IMAGES: Final = {
    "simple": "mpioperator/tensorflow-benchmarks:latest",
    "custom": "mpioperator/tensorflow-benchmarks:latest",
    "openmpi": "mpioperator/openmpi:latest",
    "elastic": "horovod-elastic-examples:0.28.1",
}
# (--run-as-user, --ssh-port, --ssh-auth-mount-path) by flavour, matching each default image (the
# port is always declared: the operator probes only a port it is told, never a guessed 22):
# tensorflow-benchmarks (Horovod-based) runs sshd as root on 22; upstream's mpioperator/openmpi base
# image runs it as root on 2222; examples/elastic/Dockerfile as the non-root mpiuser on 2222.
SSH_DEFAULTS: Final[dict[str, tuple[int | None, int | None, str | None]]] = {
    "simple": (None, 22, None),
    "custom": (None, 22, None),
    "openmpi": (None, 2222, None),
    "elastic": (1000, 2222, "/home/mpiuser/.ssh"),
}


def _add_common(parser: argparse.ArgumentParser, flavour: str) -> None:
    parser.add_argument("--name", required=True, help="MPIJob name (a DNS-1035 label)")
    parser.add_argument(
        "--namespace", help="metadata.namespace (omitted: kubectl's current namespace)"
    )
    parser.add_argument(
        "--image", default=DEFAULT_IMAGES[flavour], help="container image (default: %(default)s)"
    )
    parser.add_argument(
        "--command", help="launcher program as a shell-style line, e.g. 'python train.py'"
    )
    parser.add_argument(
        "--args", help="comma-separated arguments appended to the launcher's program"
    )
    uid, port, path = SSH_DEFAULTS[flavour]
    parser.add_argument(
        "--run-as-user",
        type=int,
        default=uid,
        help="uid of every pod's containers (default: %(default)s; None: the image's user)",
    )
    parser.add_argument(
        "--ssh-port",
        type=int,
        default=port,
        help="port the workers' sshd listens on, declared as their container port `ssh`, which the "
        "operator's readiness probe checks (default: %(default)s)",
    )
    parser.add_argument(
        "--ssh-auth-mount-path",
        default=path,
        help="the SSH user's ~/.ssh (default: %(default)s; None: the operator's /root/.ssh)",
    )


def register(subparsers: Any) -> None:
    """Adds `generate {simple,custom,openmpi,elastic}` to the `mpi-operator` subcommands."""
    generate = subparsers.add_parser("generate", help="print an MPIJob manifest from a prototype")
    flavours = generate.add_subparsers(dest="flavour", required=True, metavar="FLAVOUR")

    p = flavours.add_parser("simple", help="total --gpus split into workers of --gpus-per-node")
    _add_common(p, "simple")
    p.add_argument("--gpus", type=int, default=1, help="GPUs of the whole job (default 1)")
    p.add_argument(
        "--gpus-per-node", type=int, default=1, help="GPUs (and MPI slots) per worker (default 1)"
    )

    p = flavours.add_parser("custom", help="--replicas workers with --gpus-per-replica GPUs each")
    _add_common(p, "custom")
    p.add_argument("--replicas", type=int, default=1, help="workers (default 1)")
    p.add_argument("--gpus-per-replica", type=int, default=1, help="GPUs per worker (default 1)")

    p = flavours.add_parser(
        "openmpi", help="the kubeflow-openmpi prototype (mpirun after a bounded wait)"
    )
    _add_common(p, "openmpi")
    p.add_argument("--workers", type=int, default=4, help="workers (default 4)")
    p.add_argument("--gpu", type=int, default=0, help="GPUs per worker (default 0)")
    p.add_argument("--cpu", help="CPU limit per worker, e.g. 4 or 500m")
    p.add_argument("--memory", help="memory limit per worker, e.g. 8Gi")
    p.add_argument("--node-selector", help="worker nodeSelector as key=value[,key=value...]")
    p.add_argument(
        "--init-timeout",
        type=int,
        default=300,
        help="seconds the launcher waits for workers' ssh (default 300)",
    )
    p.add_argument(
        "--exec", dest="exec_", help="program mpirun starts on every slot, e.g. 'python train.py'"
    )

    p = flavours.add_parser(
        "elastic", help="elastic Horovod: --min..--max workers, horovodrun bounds"
    )
    _add_common(p, "elastic")
    p.add_argument(
        "--min", dest="min_replicas", type=int, default=1, help="fewest workers (default 1)"
    )
    p.add_argument("--max", dest="max_replicas", type=int, required=True, help="most workers")
    p.add_argument("--replicas", type=int, help="workers at start (default --min)")
    p.add_argument(
        "--slots", type=int, help="Horovod processes per worker (default GPUs per worker, else 1)"
    )
    p.add_argument(
        "--gpus-per-worker", type=int, default=0, help="nvidia.com/gpu per worker (default 0)"
    )
    p.add_argument(
        "--script", help=f"training script run with python (default {DEFAULT_ELASTIC_SCRIPT})"
    )

    generate.set_defaults(func=run)


def build(args: argparse.Namespace) -> dict[str, Any]:
    """The MPIJob the parsed `generate` flags describe (GenerateError on a bad combination)."""
    common = CommonOptions(
        name=args.name,
        image=args.image,
        namespace=args.namespace,
        command=args.command,
        args=args.args,
        run_as_user=args.run_as_user,
        ssh_port=args.ssh_port,
        ssh_auth_mount_path=args.ssh_auth_mount_path,
    )
    if args.flavour == "simple":
        return simple(common, gpus=args.gpus, gpus_per_node=args.gpus_per_node)
    if args.flavour == "custom":
        return custom(common, replicas=args.replicas, gpus_per_replica=args.gpus_per_replica)
    if args.flavour == "openmpi":
        return openmpi(
            common,
            workers=args.workers,
            gpu=args.gpu,
            cpu=args.cpu,
            memory=args.memory,
            node_selector=args.node_selector,
            init_timeout=args.init_timeout,
            exec_=args.exec_,
        )
    return elastic(
        common,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        replicas=args.replicas,
        slots=args.slots,
        gpus_per_worker=args.gpus_per_worker,
        script=args.script,
    )


def to_yaml(job: dict[str, Any]) -> str:
    """Block-style YAML in the order the builders wrote the keys; multi-line strings as `|`
    blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # a manifest spells every value out; `&id001` anchors only confuse readers

    def represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, represent_str)
    return yaml.dump(job, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=100)


def run(args: argparse.Namespace) -> int:
    """Prints the generated MPIJob on stdout; a bad option prints `error: --flag: why` on stderr,
    exit 2."""
    try:
        job = build(args)
    except GenerateError as exc:
        print(f"mpi-operator generate {args.flavour}: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(to_yaml(job))
    return 0
