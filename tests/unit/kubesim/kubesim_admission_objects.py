"""Realistic objects the MPI operator builds, shared by the kubesim admission and patch tests.

Each builder returns a fresh dict so tests can mutate their copy.
"""

from __future__ import annotations

from typing import Any

JOB_UID = "5f0c6a56-7e8e-4c45-9a1f-2b7c5e0d1a11"
POD_UID = "8d7d4c41-2f6b-4a43-8f0e-0f8c2c1b9e22"


def owner_ref() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "name": "pi",
        "uid": "0c3b8f2e-1d7a-4e59-b6a4-3f2d9e8c7b33",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def worker_pod(index: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pi-worker-{index}",
            "namespace": "team-a",
            "uid": POD_UID,
            "labels": {
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/job-role": "worker",
                "training.kubeflow.org/replica-index": str(index),
                "mpi_job_name": "pi",
                "mpi_role_type": "worker",
            },
            "annotations": {"kubesim/ready-seconds": "0.5"},
            "ownerReferences": [owner_ref()],
        },
        "spec": {
            "hostname": f"pi-worker-{index}",
            "subdomain": "pi",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "worker",
                    "image": "mpioperator/tensorflow-benchmarks:latest",
                    "command": ["/usr/sbin/sshd", "-De"],
                    "ports": [{"name": "ssh", "containerPort": 22}],
                    "env": [
                        {"name": "K_MPI_JOB_ROLE", "value": "worker"},
                        {
                            "name": "POD_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                        },
                    ],
                    "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "500m", "memory": "1Gi"}},
                    "volumeMounts": [
                        {"name": "ssh-auth", "mountPath": "/root/.ssh"},
                        {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
                    ],
                    "readinessProbe": {"tcpSocket": {"port": 22}, "periodSeconds": 2},
                }
            ],
            "volumes": [
                {
                    "name": "ssh-auth",
                    "secret": {
                        "secretName": "pi-ssh",
                        "defaultMode": 0o600,
                        "items": [
                            {"key": "ssh-privatekey", "path": "id_rsa"},
                            {"key": "ssh-publickey", "path": "id_rsa.pub"},
                            {"key": "ssh-publickey", "path": "authorized_keys"},
                        ],
                    },
                },
                {
                    "name": "mpi-job-config",
                    "configMap": {
                        "name": "pi-config",
                        "items": [
                            {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                            {
                                "key": "discover_hosts.sh",
                                "path": "discover_hosts.sh",
                                "mode": 0o555,
                            },
                        ],
                    },
                },
            ],
        },
    }


def launcher_job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "pi-launcher",
            "namespace": "team-a",
            "uid": JOB_UID,
            "labels": {
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/job-role": "launcher",
            },
            "ownerReferences": [owner_ref()],
        },
        "spec": {
            "backoffLimit": 6,
            "template": {
                "metadata": {
                    "labels": {
                        "training.kubeflow.org/job-name": "pi",
                        "training.kubeflow.org/job-role": "launcher",
                    }
                },
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [
                        {
                            "name": "launcher",
                            "image": "mpioperator/tensorflow-benchmarks:0.1",
                            "command": [
                                "horovodrun",
                                "-np",
                                "2",
                                "--host-discovery-script",
                                "/etc/mpi/discover_hosts.sh",
                            ],
                            "env": [{"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"}],
                            "volumeMounts": [{"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "mpi-job-config",
                            "configMap": {
                                "name": "pi-config",
                                "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
                            },
                        }
                    ],
                },
            },
        },
    }


def headless_service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "pi", "namespace": "team-a", "ownerReferences": [owner_ref()]},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/job-role": "worker",
            },
        },
    }


def script_config_map() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "pi-config", "namespace": "team-a", "ownerReferences": [owner_ref()]},
        "data": {
            "hostfile": "pi-worker-0.pi.team-a.svc slots=2\npi-worker-1.pi.team-a.svc slots=2\n",
            "discover_hosts.sh": (
                "#!/bin/sh\necho pi-worker-0.pi.team-a.svc:2\necho pi-worker-1.pi.team-a.svc:2\n"
            ),
        },
    }


def ssh_secret() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/ssh-auth",
        "metadata": {"name": "pi-ssh", "namespace": "team-a", "ownerReferences": [owner_ref()]},
        "data": {
            "ssh-privatekey": "LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0tLS0K",
            "ssh-publickey": (
                "ZWNkc2Etc2hhMi1uaXN0cDI1NiBBQUFBRTJWalpITmhMWE5vWVRJdGJtbHpkSEF5TlRZPQ=="
            ),
        },
    }
