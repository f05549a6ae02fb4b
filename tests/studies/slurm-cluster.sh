#!/usr/bin/env bash
# Test-only: a single-node Slurm cluster on localhost, in a temporary folder, for
# tests/studies/slurm.sh. Run as root.
#   slurm-cluster.sh install     Debian's slurm-wlm and munge, only what is missing (idempotent)
#   slurm-cluster.sh start DIR   writes DIR/slurm.conf, starts munged, slurmctld and slurmd, waits
#                                until the node is idle; prints the environment to use it
#                                (export SLURM_CONF=...)
#   slurm-cluster.sh stop DIR    stops the three daemons started in DIR (by their pid files)
# Every failure is one line on stderr starting "slurm-cluster:" and a non-zero exit status.
set -euo pipefail

die() { echo "slurm-cluster: $*" >&2; exit 1; }

install() {
  local missing=() p
  for p in slurmctld slurmd slurm-client munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "cannot install ${missing[*]}: not root (run the tests as root, or install slurm-wlm and munge)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed"
  # slurm-wlm is the metapackage of exactly these; its daemons are not started by the install here.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

pid_of() { [ -s "$1" ] && cat "$1" || true; }

stop() {
  local dir=$1 f pid i
  for f in slurmd slurmctld munged; do
    pid=$(pid_of "$dir/$f.pid")
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null || continue
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  # slurmstepd of a task still running (a cancelled test) would outlive slurmd.
  for pid in $(pgrep -f "slurmstepd.*" 2>/dev/null || true); do
    if grep -qs "$dir" "/proc/$pid/cmdline" "/proc/$pid/environ"; then kill -9 "$pid" 2>/dev/null || true; fi
  done
  rm -f "$dir"/*.pid
}

start() {
  local dir=$1
  [ "$(id -u)" -eq 0 ] || die "the test cluster runs its daemons as root; not root"
  for b in munged mungekey slurmctld slurmd sinfo; do
    command -v "$b" >/dev/null || die "$b is missing (slurm-cluster.sh install)"
  done
  mkdir -p "$dir"/{state,spool,munge}
  chmod 700 "$dir/munge"
  local host cpus mem port0
  host=$(hostname -s)
  cpus=$(nproc --all)
  # The memory Slurm sees (free memory in MiB, minus a margin so slurmd does not drain the node).
  mem=$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
  # Two free ports on 127.0.0.1 for slurmctld and slurmd.
  port0=$(python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local ctld_port=$port0 slurmd_port
  slurmd_port=$(python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  [ "$slurmd_port" != "$ctld_port" ] || slurmd_port=$((ctld_port + 1))

  # munge: a key of its own, a socket in the folder.
  [ -s "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key" 2>"$dir/munged.log" \
    || die "mungekey failed: $(tail -1 "$dir/munged.log")"
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed" \
    >>"$dir/munged.log" 2>&1 || die "munged did not start: $(tail -1 "$dir/munged.log")"

  cat >"$dir/slurm.conf" <<EOF
# A single-node test cluster on localhost (tests/studies/slurm-cluster.sh).
ClusterName=kelletest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_min_interval=100000
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=600
MaxArraySize=10001
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$dir/slurm.conf" >>"$dir/slurmctld.log" 2>&1 \
    || die "slurmctld did not start: $(grep -i error "$dir/slurmctld.log" | tail -1)"
  slurmd -f "$dir/slurm.conf" -N "$host" >>"$dir/slurmd.log" 2>&1 \
    || die "slurmd did not start: $(grep -i error "$dir/slurmd.log" | tail -1)"
  local i state=
  for i in $(seq 150); do
    state=$(sinfo -h -N -o %T 2>/dev/null | head -1 || true)
    case $state in idle|mixed|allocated) echo "export SLURM_CONF=$dir/slurm.conf"; return 0 ;; esac
    sleep 0.2
  done
  local why
  why=$(grep -ihE "error|fatal" "$dir/slurmctld.log" "$dir/slurmd.log" 2>/dev/null | tail -1)
  die "the node did not become idle in 30 s (state '${state:-none}'): ${why:-see $dir/slurmd.log}"
}

case ${1:-} in
  install) install ;;
  start) [ -n "${2:-}" ] || die "start: expected a folder"; start "$2" ;;
  stop) [ -n "${2:-}" ] || die "stop: expected a folder"; stop "$2" ;;
  *) die "expected install, start DIR or stop DIR" ;;
esac
