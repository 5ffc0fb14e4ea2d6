"""Elastic bounds of a job: its elasticPolicy, or bounds inferred from the launcher's horovodrun
command.

A manifest without `elasticPolicy` whose launcher runs `horovodrun ... --host-discovery-script` is
elastic too (manifests written for the upstream operator look like that), with worker bounds from
`--min-np` / `--max-np` and the slots per worker. The inference is not applied by `normalize()`
(normalizing a canonical object must stay the identity); callers that need the effective policy ask
`effective_elastic_policy(job)`.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mpi_operator.api import defaults
from mpi_operator.api.models import ElasticPolicy, MPIJob

_FLAGS = {"-np": "np", "--num-proc": "np", "--min-np": "min_np", "--max-np": "max_np"}
_DISCOVERY_FLAG = "--host-discovery-script"


@dataclass(frozen=True)
class HorovodrunArgs:
    """The process-count flags of one `horovodrun` invocation."""

    np: int | None = None
    min_np: int | None = None
    max_np: int | None = None
    host_discovery_script: str | None = None


def launcher_argv(job: MPIJob) -> list[str]:
    """The launcher's containers[0] command + args, with `sh -c "..."` scripts split into words."""
    spec = job.launcher.template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], Mapping):
        return []
    words: list[str] = []
    for key in ("command", "args"):
        part = containers[0].get(key)
        if not isinstance(part, list):
            continue
        for word in part:
            if not isinstance(word, str):
                continue
            if "horovodrun" in word and any(ch.isspace() for ch in word):
                try:
                    words.extend(shlex.split(word))
                except ValueError:
                    words.extend(word.split())
            else:
                words.append(word)
    return words


def parse_horovodrun(argv: Sequence[str]) -> HorovodrunArgs | None:
    """Flags of the first `horovodrun` in `argv` (None when there is none); `--flag=value` works
    too."""
    starts = [i for i, word in enumerate(argv) if word.rsplit("/", 1)[-1] == "horovodrun"]
    if not starts:
        return None
    counts: dict[str, int] = {}
    script: str | None = None
    words = list(argv[starts[0] + 1 :])
    i = 0
    while i < len(words):
        flag, sep, inline = words[i].partition("=")
        value = inline if sep else (words[i + 1] if i + 1 < len(words) else "")
        consumed = 1 if sep else 2
        if flag in _FLAGS and value.isdigit():
            counts[_FLAGS[flag]] = int(value)
            i += consumed
        elif flag == _DISCOVERY_FLAG and value:
            script = value
            i += consumed
        else:
            i += 1
    return HorovodrunArgs(
        np=counts.get("np"),
        min_np=counts.get("min_np"),
        max_np=counts.get("max_np"),
        host_discovery_script=script,
    )


def infer_elastic_policy(job: MPIJob) -> ElasticPolicy | None:
    """Bounds from `horovodrun --host-discovery-script ... --min-np A --max-np B` (None if not
    elastic)."""
    args = parse_horovodrun(launcher_argv(job))
    if args is None or args.host_discovery_script is None:
        return None
    slots = max(defaults.slots_per_worker(job.spec), 1)
    worker = job.worker
    replicas = worker.replicas if worker is not None else 0
    low = args.min_np if args.min_np is not None else args.np
    min_replicas = max(1, math.ceil(low / slots)) if low else 1
    # Horovod caps processes at --max-np; a worker only partly used would waste its slots.
    max_replicas = args.max_np // slots if args.max_np is not None else max(replicas, min_replicas)
    return ElasticPolicy(min_replicas=min_replicas, max_replicas=max(max_replicas, min_replicas))


def effective_elastic_policy(job: MPIJob) -> ElasticPolicy | None:
    """`spec.elasticPolicy` if set, else the policy inferred from the launcher command, else
    None."""
    return job.spec.elastic_policy or infer_elastic_policy(job)
