"""Elastic MPI Operator: reconciles kubeflow.org MPIJobs, with first-class elastic Horovod."""

__version__ = "0.1.0"
