"""The `mpijobs.kubeflow.org` CustomResourceDefinition, generated from the API models.

`crds/kubeflow.org_mpijobs.yaml` is this module's output (`mpi-operator crds --out crds`); a test
fails when the two drift. The models are the single source: their JSON schema is turned into a
structural OpenAPI v3 schema (refs inlined, titles dropped, nullable unions collapsed), the legacy
fields of `v1`/`v1alpha2`/`v1alpha1` are added so that one superset schema serves every version
without pruning what old manifests say, and CEL rules carry the invariants an API server can check
at admission.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, Final

import yaml

from mpi_operator.api import constants as c
from mpi_operator.api.legacy import ServedMPIJob
from mpi_operator.api.models import MPIJobSpec

FILE_NAME: Final = f"{c.GROUP}_{c.PLURAL}.yaml"

# Structural defaults are kept only where "unset" carries no meaning of its own. The others are
# applied by the operator: slotsPerWorker (unset = derived from GPUs), mpiImplementation and
# cleanPodPolicy (a legacy mpiDistribution / top-level cleanPodPolicy must win over them),
# Worker.replicas (upstream's 0 would only turn a missing field into an invalid one).
_KEEP_DEFAULTS: Final = frozenset(
    {
        "spec.runLauncherAsWorker",
        "spec.runPolicy",
        "spec.runPolicy.suspend",
        "spec.sshAuthMountPath",
        "spec.launcherCreationPolicy",
        "spec.mpiReplicaSpecs.Launcher.replicas",
        "spec.mpiReplicaSpecs.Launcher.restartPolicy",
        "spec.mpiReplicaSpecs.Worker.restartPolicy",
        "spec.elasticPolicy.minReplicas",
        "spec.elasticPolicy.scaleInGracePeriodSeconds",
        "spec.elasticPolicy.settleSeconds",
        "spec.elasticPolicy.maxReplacements",
        "spec.elasticPolicy.belowMinTimeoutSeconds",
    }
)

_WORKERS: Final = "self.mpiReplicaSpecs.Worker"
_HAS_WORKER_REPLICAS: Final = (
    f"has(self.mpiReplicaSpecs) && has({_WORKERS}) && has({_WORKERS}.replicas)"
)

# Invariants checked at admission, so `kubectl apply`/`patch`/`scale` fail at once with the reason
# instead of the operator reporting it later. Each mirrors a rule of api/validation.py.
_SPEC_RULES: Final[list[dict[str, str]]] = [
    {
        "rule": "has(self.mpiReplicaSpecs) || has(self.replicas) || has(self.gpus)"
        " || has(self.processingUnits)",
        "message": "mpiReplicaSpecs is required",
        "fieldPath": ".mpiReplicaSpecs",
        "reason": "FieldValueRequired",
    },
    # The schema's minimum (1) and maximum refuse what is out of any bound; these rules stay silent
    # then, so one mistake gets one error. messageExpression puts the bound in the message.
    {
        "rule": f"!has(self.elasticPolicy) || !({_HAS_WORKER_REPLICAS}) || "
        f"!has(self.elasticPolicy.minReplicas) || {_WORKERS}.replicas < 1 || "
        f"{_WORKERS}.replicas >= self.elasticPolicy.minReplicas",
        "message": "Worker replicas must be >= elasticPolicy.minReplicas",
        "messageExpression": "'Worker replicas must be >= elasticPolicy.minReplicas (' + "
        "string(self.elasticPolicy.minReplicas) + ')'",
        "fieldPath": ".mpiReplicaSpecs.Worker.replicas",
    },
    {
        "rule": f"!has(self.elasticPolicy) || !({_HAS_WORKER_REPLICAS}) || "
        f"{_WORKERS}.replicas > {c.MAX_WORKER_REPLICAS} || "
        f"{_WORKERS}.replicas <= self.elasticPolicy.maxReplicas",
        "message": "Worker replicas must be <= elasticPolicy.maxReplicas",
        "messageExpression": "'Worker replicas must be <= elasticPolicy.maxReplicas (' + "
        "string(self.elasticPolicy.maxReplicas) + ')'",
        "fieldPath": ".mpiReplicaSpecs.Worker.replicas",
    },
]

_ELASTIC_RULES: Final[list[dict[str, str]]] = [
    {
        "rule": "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
        "message": "minReplicas must be <= maxReplicas",
        "messageExpression": "'minReplicas (' + string(self.minReplicas) + ') must be <= "
        "maxReplicas (' + string(self.maxReplicas) + ')'",
        "fieldPath": ".minReplicas",
    }
]

# Worker pods are named `<job>-worker-<i>` and are DNS hosts: the job name must make them DNS-1035
# labels.
_ROOT_RULES: Final[list[dict[str, str]]] = [
    {
        "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        "message": "metadata.name must consist of lower case alphanumeric characters or '-', start "
        "with a "
        "letter and end with an alphanumeric character: worker pods `<name>-worker-<index>` are "
        "DNS-1035 "
        "host names",
        "fieldPath": ".metadata.name",
    }
]

_PRINTER_COLUMNS: Final[list[dict[str, Any]]] = [
    {
        "name": "State",
        "type": "string",
        "description": "The latest condition of the job",
        "jsonPath": ".status.conditions[-1:].type",
    },
    {
        "name": "Workers",
        "type": "integer",
        "description": "Desired worker replicas",
        "jsonPath": ".spec.mpiReplicaSpecs.Worker.replicas",
    },
    {
        "name": "Ready",
        "type": "integer",
        "description": "Worker pods that are Ready",
        "jsonPath": ".status.replicaStatuses.Worker.ready",
    },
    {
        "name": "Discovered",
        "type": "integer",
        "description": "Elastic jobs: workers discover_hosts.sh lists now",
        "jsonPath": ".status.elastic.discovered",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _structural(node: Any, defs: dict[str, Any], path: str) -> Any:
    """Inlines `$ref`s and drops what a structural CRD schema cannot hold (titles, unwanted
    defaults)."""
    if isinstance(node, list):
        return [_structural(item, defs, path) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        # A description next to the $ref describes the field; the target's describes the type.
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs, path)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key == "default" and path not in _KEEP_DEFAULTS:
            continue
        if key == "properties":
            out[key] = {
                name: _structural(sub, defs, f"{path}.{name}".lstrip("."))
                for name, sub in value.items()
            }
        elif key in ("items", "additionalProperties", "anyOf"):
            out[key] = _structural(value, defs, path)
        else:
            out[key] = copy.deepcopy(value)
    return out


def openapi_schema() -> dict[str, Any]:
    """The superset openAPIV3Schema served by every version.

    The legacy fields of `v1`/`v1alpha2`/`v1alpha1` (api/legacy.py) stay in it so the API server
    keeps what old manifests say; the operator maps each to its v2beta1 equivalent and says so in an
    Event.
    """
    raw = ServedMPIJob.model_json_schema(by_alias=True)
    schema: dict[str, Any] = _structural(raw, raw.get("$defs", {}), "")
    props = schema["properties"]
    # The models' view of apiVersion/kind/metadata is the operator's; on the wire they are the usual
    # ones.
    props["apiVersion"] = {
        "type": "string",
        "description": "APIVersion of this representation: kubeflow.org/v2beta1 (or a deprecated "
        "version).",
    }
    props["kind"] = {"type": "string", "description": "Kind of this object: MPIJob."}
    props["metadata"] = {"type": "object"}
    spec = props["spec"]
    # Canonical fields first, so `kubectl explain` reads like the v2beta1 API with the legacy ones
    # after.
    canonical = [field.alias or name for name, field in MPIJobSpec.model_fields.items()]
    spec["properties"] = {
        **{name: spec["properties"][name] for name in canonical},
        **{name: sub for name, sub in spec["properties"].items() if name not in canonical},
    }
    # v1alpha1 manifests have no mpiReplicaSpecs; a CEL rule requires one of the shapes instead.
    spec.pop("required", None)
    spec["x-kubernetes-validations"] = _SPEC_RULES
    spec["properties"]["elasticPolicy"]["x-kubernetes-validations"] = _ELASTIC_RULES
    schema["required"] = ["spec"]
    schema["x-kubernetes-validations"] = _ROOT_RULES
    return schema


UNDEPRECATED_OLD_VERSION: Final = "v1"


def _version(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": name,
        "served": True,
        "storage": name == c.VERSION,
    }
    # v1 is not marked deprecated although it is old: Kubernetes ranks it above v2beta1, so every
    # plain `kubectl get mpij` reads through it and would print v1's warning to every user. The
    # alphas rank below v2beta1 and warn only whoever writes them; v1 manifests get the
    # LegacyFieldsMapped event.
    if name not in (c.VERSION, UNDEPRECATED_OLD_VERSION):
        version["deprecated"] = True
        version["deprecationWarning"] = (
            f"{c.GROUP}/{name} MPIJob is deprecated; use {c.API_VERSION} (the operator maps the "
            "old fields)"
        )
    version["schema"] = {"openAPIV3Schema": schema}
    version["subresources"] = {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.mpiReplicaSpecs.Worker.replicas",
            "statusReplicasPath": ".status.replicaStatuses.Worker.active",
            "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
        },
    }
    version["additionalPrinterColumns"] = copy.deepcopy(_PRINTER_COLUMNS)
    return version


def custom_resource_definition() -> dict[str, Any]:
    """The CRD as a plain `apiextensions.k8s.io/v1` object."""
    schema = openapi_schema()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": c.CRD_NAME,
            "labels": {"app.kubernetes.io/name": c.OPERATOR_NAME},
        },
        "spec": {
            "group": c.GROUP,
            "names": {
                "kind": c.KIND,
                "listKind": c.LIST_KIND,
                "plural": c.PLURAL,
                "singular": c.SINGULAR,
                "shortNames": list(c.SHORT_NAMES),
                "categories": list(c.CATEGORIES),
            },
            "scope": "Namespaced",
            # One schema for all versions: the operator, not a webhook, maps legacy fields.
            "conversion": {"strategy": "None"},
            "versions": [_version(name, copy.deepcopy(schema)) for name in c.SERVED_VERSIONS],
        },
    }


def render() -> str:
    header = (
        "# Generated by `mpi-operator crds` from operator/mpi_operator/api/models.py: do not "
        "edit.\n"
    )
    body = yaml.safe_dump(
        custom_resource_definition(), sort_keys=False, width=100, allow_unicode=True
    )
    return header + "---\n" + body


def main(*, out_dir: str | None) -> int:
    text = render()
    if out_dir is None:
        sys.stdout.write(text)
        return 0
    target = Path(out_dir) / FILE_NAME
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"mpi-operator crds: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {target}", file=sys.stderr)
    return 0
