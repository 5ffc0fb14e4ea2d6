"""The flags of `mpi-operator run`: ours, upstream's spellings of them, Go's and klog's ways to pass
them.

So that a Deployment moved from the upstream operator keeps its arguments, `run` accepts upstream's
flag names as aliases of ours (plus those only upstream has), Go's one-dash `flag` syntax
(`go_style` rewrites it, as argparse reads `-threadiness` as `-t hreadiness`), and klog's flags
(`-v` >= 4 is DEBUG, the rest named in one notice). Values are strings converted in `settings`, so
an error names the spelling the user wrote. Precedence: flag, `MPI_OPERATOR_<NAME>`, the
conventional variable (`POD_NAMESPACE`, ...), default. `--kube-api-qps` unset is not upstream's 5
(see "No client-side rate limit" in docs/architecture.md#decisions-and-why).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NoReturn, TypeVar, cast, get_args

from mpi_discovery.hostfile import is_dns_name
from mpi_operator.api.validation import worker_limit
from mpi_operator.settings import (
    DEFAULT_SCHEDULER_PLUGINS_NAME,
    FALLBACK_BURST,
    FALLBACK_QPS,
    GangScheduler,
    LogFormat,
    LogLevel,
    Settings,
)

API_VERSION: Final = "kubeflow.org/v2beta1"
ENV_PREFIX: Final = "MPI_OPERATOR_"
DEBUG_VERBOSITY: Final = 4
"""klog's `-v` from which upstream logs its debug lines: here, DEBUG logging."""

# klog's flags (klog/v2 `InitFlags`): booleans take no value in Go (`-x` or `-x=true`).
KLOG_BOOL_FLAGS: Final = ("logtostderr", "alsologtostderr", "add_dir_header", "skip_headers",
                          "skip_log_headers", "one_output")  # fmt: skip
KLOG_VALUE_FLAGS: Final = ("vmodule", "stderrthreshold", "log_dir", "log_file", "log_file_max_size",
                           "log_backtrace_at")  # fmt: skip

T = TypeVar("T")


class FlagError(argparse.ArgumentTypeError, ValueError):
    """A flag or environment value that cannot be used; the message is one line naming it. An
    ArgumentTypeError too, so the parsers below serve as argparse `type=`s (`mpi-operator sim`'s
    flags) and argparse prints the message."""


class _Store(argparse.Action):
    """Stores the raw string and remembers the spelling used, for error messages and notices."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if self.nargs == argparse.OPTIONAL and values is None:
            values = "true"  # a Go boolean given bare: `-alsologtostderr`
        setattr(namespace, self.dest, values)
        given: dict[str, str] = getattr(namespace, "given", None) or {}
        given[self.dest] = option_string or self.dest
        namespace.given = given


class _Append(_Store):
    """Repeatable (`--namespace a --namespace b`)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        super().__call__(
            parser, namespace, [*(getattr(namespace, self.dest) or []), values], option_string
        )


class _Version(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> NoReturn:
        print(version_text())
        parser.exit(0)


def version_text() -> str:
    from mpi_operator import __version__

    return f"mpi-operator {__version__} (API {API_VERSION}, Python {platform.python_version()})"


def _env(name: str) -> str:
    return f"{ENV_PREFIX}{name.upper().replace('-', '_')}"


def add_flags(run: argparse.ArgumentParser) -> None:
    """Registers every `run` flag on `run` (whose parser must have allow_abbrev=False, as Go's
    flag)."""

    group: Any = run

    def add(*names: str, help: str, **kwargs: Any) -> None:
        kwargs.setdefault("action", _Store)
        group.add_argument(*names, default=None, help=help, **kwargs)

    group = run.add_argument_group("API server")
    add(
        "--kubeconfig",
        "--kubeConfig",
        dest="kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: $KUBECONFIG, else the in-cluster config, else "
        "~/.kube/config)",
    )
    add(
        "--master",
        metavar="URL",
        help="API server URL, overriding the kubeconfig's server; alone, a plain connection to it "
        "(for example `kubectl proxy`) (default: the kubeconfig's server)",
    )
    add(
        "--qps",
        "--kube-api-qps",
        dest="qps",
        metavar="N",
        help="client-side limit of API requests per second; zero or negative: none (default: none "
        "once "
        f"the API server shows it has API Priority and Fairness, {FALLBACK_QPS:g} before that or "
        "without "
        f"it; upstream's 5 is not taken over; env {_env('qps')})",
    )
    add(
        "--burst",
        "--kube-api-burst",
        dest="burst",
        metavar="N",
        help=f"burst of the client-side limit (default: {FALLBACK_BURST}; env {_env('burst')})",
    )

    group = run.add_argument_group("reconciling")
    add(
        "--namespace",
        action=_Append,
        metavar="NS",
        help='namespace to watch, repeatable; "" means all (default: all, or the comma-separated '
        f"${_env('namespace')}, else $KUBEFLOW_NAMESPACE as upstream)",
    )
    add(
        "--workers",
        "--threadiness",
        dest="workers",
        metavar="N",
        help=f"concurrent reconciles, never two for one job (default: {Settings.workers}; "
        f"env {_env('workers')})",
    )
    add(
        "--queue-qps",
        "--controller-queue-rate-limit",
        dest="queue_qps",
        metavar="N",
        help="overall rate of the work queue's retries per second (default: "
        f"{Settings.queue_qps:g}; "
        f"env {_env('queue_qps')})",
    )
    add(
        "--queue-burst",
        "--controller-queue-burst",
        dest="queue_burst",
        metavar="N",
        help=f"burst of the work queue's retries (default: {Settings.queue_burst}; "
        f"env {_env('queue_burst')})",
    )
    add(
        "--cluster-domain",
        metavar="DOMAIN",
        help="appended to worker host names, <pod>.<job>.<ns>.svc.<domain> (default: none; "
        f"env {_env('cluster_domain')})",
    )
    add(
        "--gpus-per-node",
        metavar="N",
        help=f"v1alpha1 `gpus` split: workers = gpus / N (default: 1; env {_env('gpus_per_node')})",
    )
    add(
        "--gang-scheduling",
        metavar="SCHEDULER",
        help="PodGroups per MPIJob: `volcano`, or the name of a scheduler-plugins scheduler, as "
        "upstream; "
        f'`scheduler-plugins` means {DEFAULT_SCHEDULER_PLUGINS_NAME}; "": none (default: none; '
        f"env {_env('gang_scheduling')})",
    )

    add(
        "--max-workers-per-job",
        metavar="N",
        help="refuse MPIJobs with more than N workers (the Invalid condition names the limit); may "
        "only "
        "lower the ceiling the CRD enforces (default: that ceiling; env "
        f"{_env('max_workers_per_job')})",
    )

    group = run.add_argument_group("leadership, serving and logs")
    group.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="take the Lease before reconciling (default: true; env "
        f"{_env('leader_elect')}=true|false)",
    )
    add(
        "--lease-namespace",
        "--lock-namespace",
        dest="lease_namespace",
        metavar="NS",
        help=f"namespace of the leader-election Lease (default: ${_env('lease_namespace')}, else "
        "$POD_NAMESPACE, else mpi-operator)",
    )
    add(
        "--metrics-address",
        metavar="HOST:PORT",
        help="serves /healthz, /readyz and /metrics; port 0 picks a free one (default: "
        f"{Settings.metrics_address}; env {_env('metrics_address')})",
    )
    add(
        "--monitoring-port",
        metavar="PORT",
        help="upstream's /metrics port: N > 0 serves /metrics, /healthz and /readyz on 0.0.0.0:N; "
        "0 "
        "keeps --metrics-address, since health is always served (default: 0)",
    )
    add(
        "--log-format",
        metavar="FORMAT",
        help=f"json or text lines on stderr (default: text; env {_env('log_format')})",
    )
    add(
        "--log-level",
        metavar="LEVEL",
        help=(
            f"debug, info, warning or error; wins over -v (default: info; env {_env('log_level')})"
        ),
    )
    group.add_argument("--version", action=_Version, help="print the version and exit")

    klog = run.add_argument_group(
        "klog flags", "upstream's logging flags, accepted so that its manifests run unchanged"
    )
    klog.add_argument(
        "--v",
        dest="v",
        action=_Store,
        default=None,
        metavar="N",
        help=f"klog verbosity: {DEBUG_VERBOSITY} or more logs at DEBUG (default: 0)",
    )
    for name in KLOG_BOOL_FLAGS:
        klog.add_argument(
            f"--{name}",
            dest=f"klog_{name}",
            action=_Store,
            nargs="?",
            default=None,
            metavar="BOOL",
            help="accepted and ignored, with a notice: logs go to stderr (default: false)",
        )
    for name in KLOG_VALUE_FLAGS:
        klog.add_argument(
            f"--{name}",
            dest=f"klog_{name}",
            action=_Store,
            default=None,
            metavar="VALUE",
            help="accepted and ignored, with a notice (default: none)",
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mpi-operator run", allow_abbrev=False)
    add_flags(parser)
    return parser


@functools.cache
def long_names() -> frozenset[str]:
    """The names (without dashes) of the long options of `run`, for `go_style`."""
    return frozenset(
        option[2:]
        for action in _parser()._actions
        for option in action.option_strings
        if option.startswith("--")
    )


def go_style(argv: Sequence[str]) -> list[str]:
    """Go's `-name[=value]` as `--name[=value]` when `name` is a long option of `run` (never after
    `--`).

    Negative numbers (`--qps -1`) and `-h` are left alone: their names are not long options."""
    names = long_names()
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            out.extend(argv[i:])
            break
        if arg.startswith("-") and not arg.startswith("--") and arg[1:].split("=", 1)[0] in names:
            arg = "-" + arg
        out.append(arg)
    return out


# --- values ---------------------------------------------------------------------------------------


def _int(text: str, least: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise FlagError(f"not a whole number: {text!r}") from None
    if least is not None and value < least:
        raise FlagError(f"must be at least {least}, got {value}")
    return value


def _float(text: str, positive: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FlagError(f"not a number: {text!r}") from None
    if value != value or (
        positive and not value > 0
    ):  # nan; a queue limit of 0 would stop all retries
        raise FlagError(f"must be more than 0, got {text}")
    return value


def _bool(text: str) -> bool:
    # Go's strconv.ParseBool.
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise FlagError(f"not a boolean: {text!r}")


def _log_level(text: str) -> LogLevel:
    if text not in get_args(LogLevel):
        raise FlagError(f"must be debug, info, warning or error, got {text!r}")
    return cast(LogLevel, text)


def _log_format(text: str) -> LogFormat:
    if text not in get_args(LogFormat):
        raise FlagError(f"must be json or text, got {text!r}")
    return cast(LogFormat, text)


def seconds(text: str) -> float:
    """A duration: zero or more seconds (nan refused)."""
    try:
        value = float(text)
    except ValueError:
        raise FlagError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise FlagError(f"{text}: must be zero or more seconds")
    return value


def fraction(text: str) -> float:
    value = _float(text)
    if not 0 <= value <= 1:
        raise FlagError(f"{text} is not in 0..1")
    return value


def port(text: str) -> int:
    port = _int(text, 0)
    if port > 65535:
        raise FlagError(f"port {port} is not in 0..65535")
    return port


def cluster_domain(text: str) -> str:
    """`--cluster-domain`: a DNS name (or empty), since it ends every host name the hostfile
    lists."""
    if text and not is_dns_name(text):
        raise FlagError(
            f"{text!r} is not a DNS name (lower-case labels of a-z, 0-9 and '-', dot-separated)"
        )
    return text


def max_workers(text: str | None) -> int:
    """`--max-workers-per-job` of `run` and `validate`: None is the ceiling; only lower values
    pass."""
    try:
        return worker_limit(None if text is None else _int(text))
    except FlagError:
        raise
    except ValueError as exc:
        raise FlagError(str(exc)) from None


def gang(value: str) -> tuple[GangScheduler | None, str]:
    """`--gang-scheduling` as upstream reads it: `volcano`, else any name is a scheduler-plugins
    scheduler's; our earlier keyword `scheduler-plugins` keeps meaning the chart's default name."""
    if not value:
        return None, DEFAULT_SCHEDULER_PLUGINS_NAME
    if value == "volcano":
        return "volcano", DEFAULT_SCHEDULER_PLUGINS_NAME
    if value == "scheduler-plugins":
        return "scheduler-plugins", DEFAULT_SCHEDULER_PLUGINS_NAME
    return "scheduler-plugins", value


class _Values:
    """Looks a dest up in the flags, then the environment, converting and naming the source on
    error."""

    def __init__(self, args: argparse.Namespace, environ: Mapping[str, str]) -> None:
        self.args = args
        self.environ = environ
        self.given: dict[str, str] = getattr(args, "given", None) or {}

    def raw(self, dest: str, env: Sequence[str] | None = None) -> tuple[str, str] | None:
        """(value, where) of the flag, else of the first set variable of `env` (None:
        MPI_OPERATOR_<dest>)."""
        value = getattr(self.args, dest, None)
        if value is not None:
            return value, self.given.get(dest, f"--{dest}")
        for name in (_env(dest),) if env is None else env:
            if self.environ.get(name):
                return self.environ[name], f"${name}"
        return None

    def get(
        self, dest: str, parse: Callable[[str], T], default: T, env: Sequence[str] | None = None
    ) -> T:
        found = self.raw(dest, env)
        if found is None:
            return default
        value, where = found
        try:
            return parse(value)
        except FlagError as exc:
            raise FlagError(f"{where}: {exc}") from None


def settings(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """The parsed `run` flags and the environment as `Settings`; `FlagError` names what is wrong."""
    env = os.environ if environ is None else environ
    values = _Values(args, env)
    namespaces: tuple[str, ...]
    if args.namespace is not None:
        namespaces = tuple(args.namespace)
    else:
        found = values.raw("namespace", (_env("namespace"), "KUBEFLOW_NAMESPACE"))
        namespaces = tuple(found[0].split(",")) if found else ()
    leader_elect = args.leader_elect
    if leader_elect is None:
        leader_elect = values.get("leader_elect", _bool, Settings.leader_elect)
    metrics_address = values.get("metrics_address", str, Settings.metrics_address)
    monitoring_port = values.get("monitoring_port", port, 0, ())
    if monitoring_port:
        if args.metrics_address is not None:
            raise FlagError(
                f"{values.given['monitoring_port']} and {values.given['metrics_address']} both set "
                "the "
                "address of /metrics: give one"
            )
        metrics_address = f"0.0.0.0:{monitoring_port}"
    # Flags win over the environment: `--log-level`, then `-v`, then $MPI_OPERATOR_LOG_LEVEL.
    levels = _log_level
    log_level = values.get("log_level", levels, Settings.log_level, ())
    if args.log_level is None:
        if values.get("v", lambda text: _int(text, 0), 0, ()) >= DEBUG_VERBOSITY:
            log_level = "debug"
        else:
            log_level = values.get("log_level", levels, Settings.log_level)
    no_gang: tuple[GangScheduler | None, str] = (None, DEFAULT_SCHEDULER_PLUGINS_NAME)
    gang_scheduling, scheduler_plugins_name = values.get("gang_scheduling", gang, no_gang)
    return Settings(
        namespaces=tuple(dict.fromkeys(ns for ns in namespaces if ns)),
        kubeconfig=values.get("kubeconfig", str, None, ()) or None,
        master=values.get("master", str, None, ()) or None,
        workers=values.get("workers", lambda text: _int(text, 1), Settings.workers),
        qps=values.get("qps", _float, Settings.qps),
        burst=values.get("burst", lambda text: _int(text, 1), Settings.burst),
        queue_qps=values.get(
            "queue_qps", lambda text: _float(text, positive=True), Settings.queue_qps
        ),
        queue_burst=values.get("queue_burst", lambda text: _int(text, 1), Settings.queue_burst),
        leader_elect=leader_elect,
        lease_namespace=values.get(
            "lease_namespace",
            str,
            Settings.lease_namespace,
            (_env("lease_namespace"), "POD_NAMESPACE"),
        ),
        metrics_address=metrics_address,
        log_format=values.get("log_format", _log_format, Settings.log_format),
        log_level=log_level,
        cluster_domain=values.get("cluster_domain", cluster_domain, Settings.cluster_domain),
        gpus_per_node=values.get(
            "gpus_per_node", lambda text: _int(text, 1), Settings.gpus_per_node
        ),
        gang_scheduling=gang_scheduling,
        scheduler_plugins_name=scheduler_plugins_name,
        max_workers_per_job=values.get("max_workers_per_job", max_workers, None),
    )


def klog_notice(args: argparse.Namespace) -> str | None:
    """One line naming the klog flags given that change nothing here (None when there are none)."""
    given: dict[str, str] = getattr(args, "given", None) or {}
    ignored = [given[dest] for dest in given if dest.startswith("klog_")]
    if not ignored:
        return None
    return (
        f"klog flags accepted and ignored: {' '.join(ignored)} (this operator logs to stderr; "
        "see --log-format and --log-level)"
    )


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """`argv` (without `run`) parsed as `mpi-operator run` parses it: for tests and tools."""
    return _parser().parse_args(go_style(argv))
