#!/bin/bash
# Entry point of the MPICH and Intel MPI stand-in images (/entrypoint.sh).
#
# 1. Loads the oneAPI environment when the image has one.
# 2. On the launcher (K_MPI_JOB_ROLE=launcher), waits until DNS answers for this pod's own host name
#    and for every host in /etc/mpi/hostfile: hydra's proxies dial the launcher back by name, and a
#    worker's name only resolves once its pod is Ready. Each name is tried up to 10 times, waiting
#    0.1 s after the first failure and twice as long after each further one; a name that never
#    resolves is reported and skipped.
# 3. Runs the container's command in its place.
set -euo pipefail

if [ -f /opt/intel/oneapi/setvars.sh ]; then
  # setvars.sh reads unset variables and returns non-zero for benign reasons.
  set +u
  # shellcheck disable=SC1091
  . /opt/intel/oneapi/setvars.sh >/dev/null || true
  set -u
fi

resolve() {
  local host=$1 attempt delay_ms=100
  for ((attempt = 1; attempt <= 10; attempt++)); do
    if nslookup "$host" >/dev/null 2>&1; then
      return 0
    fi
    sleep "$((delay_ms / 1000)).$(printf '%03d' "$((delay_ms % 1000))")"
    delay_ms=$((delay_ms * 2))
  done
  echo "Couldn't resolve $host"
  return 1
}

if [ "${K_MPI_JOB_ROLE:-}" = launcher ]; then
  resolve "${HOSTNAME:-$(hostname)}" || true
  if [ -r /etc/mpi/hostfile ]; then
    while read -r entry _ || [ -n "${entry:-}" ]; do
      host=${entry%%:*}
      case "$host" in
        "" | "#"*) continue ;;
      esac
      resolve "$host" || true
    done </etc/mpi/hostfile
  fi
fi

exec "$@"
