# syntax=docker/dockerfile:1
# The operator image: `mpi-operator run` as a non-root user on a slim Python 3.11 base.
# Stage 1 builds the project's wheel and the wheels of its runtime dependencies (PEP 517 build through
# pip, with the build backend in an isolated environment); stage 2 installs only those wheels, so no
# compiler, build backend, test tool or source tree reaches the final image. No kubesim: it is a
# distribution of its own (sim/), left out of the build context, and no extra is installed.
# tests/e2e/test_install_wheel.py runs these pip commands into a fresh virtualenv and checks what
# they install.
#   docker build -t mpi-operator:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
COPY discovery/ discovery/
RUN pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels elastic-mpi-operator \
    && pip uninstall --yes setuptools wheel pip
LABEL org.opencontainers.image.title="mpi-operator" \
      org.opencontainers.image.description="Elastic MPI Operator for kubeflow.org MPIJobs" \
      org.opencontainers.image.licenses="Apache-2.0"
# A numeric user, so the kubelet can enforce runAsNonRoot without reading /etc/passwd.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["mpi-operator", "run"]
