#!/usr/bin/env bash
# The sweep's Slurm backend against a real Slurm: a single-node cluster on localhost
# (slurm-cluster.sh installs Debian's slurm-wlm and munge if missing and starts munged, slurmctld
# and slurmd in a temporary folder), the tiny study tests/studies/slurm_tiny.yaml (7 points, one
# failing by design) run with --backend slurm --wait and compared with the local backend figure
# for figure (every column but wall_time_s), a task cancelled with scancel and the study resumed,
# the failed point retried, a point's lock respected, a job script edited and resubmitted by hand
# with a binary missing on the node. The daemons are always stopped (trap). About a minute.
#   slurm.sh KELLE_VP SRC OUT
set -euo pipefail
vp=$1; src=$2; out=$3
here=$src/tests/studies
cluster=$here/slurm-cluster.sh
study=$here/slurm_tiny.yaml
bad=system-kelle_edram_batch-0       # the point made to fail (batch 0)
a=system-original_sram_batch-1       # cancelled while running, then resumed
b=system-kelle_edram_batch-4         # runs in the same submission as $a
step() { echo "== $*"; }
die() { echo "slurm test: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (it installs slurm-wlm and munge and runs the daemons as root)"
"$cluster" install || die "cannot install slurm-wlm and munge (see the line above)"
rm -rf "$out"; mkdir -p "$out"
# A short path: munge's socket path must fit a sockaddr_un.
tmp=$(mktemp -d /tmp/kelle-slurm.XXXXXX)
trap '"$cluster" stop "$tmp"; rm -rf "$tmp"' EXIT
env=$("$cluster" start "$tmp") || die "the Slurm daemons did not start (see the line above)"
eval "$env"
export SLURM_CONF

sweep() { "$src/scripts/sweep" "$study" --backend slurm --out "$out/slurm" "$@"; }
same_csv() {  # every column but the wall time, row by row
  python3 - "$1" "$2" <<'PY'
import csv, sys
a, b = (list(csv.DictReader(open(p))) for p in sys.argv[1:3])
assert a and len(a) == len(b), f"{len(a)} rows against {len(b)}"
assert list(a[0]) == list(b[0]), "different columns"
for x, y in zip(a, b):
    for k in x:
        if k != "wall_time_s":
            assert x[k] == y[k], f"{x['scenario']}: {k}: {x[k]} (local) != {y[k]} (slurm)"
print(f"results.csv equal: {len(a)} rows x {len(a[0]) - 1} columns (wall_time_s excluded)")
PY
}
task_state() { squeue -h -t all -j "$1" -o %T 2>/dev/null | head -1; }

step "local backend"
rc=0; "$src/scripts/sweep" "$study" --out "$out/local" --kelle-vp "$vp" --workers 2 >"$out/local.txt" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || die "the local sweep should fail on one point (exit $rc)"

step "slurm backend, --wait"
rc=0; sweep --kelle-vp "$vp" --max-parallel 2 --time 5 --wait 2>&1 | tee "$out/run1.txt" || rc=${PIPESTATUS[0]}
[ "$rc" -eq 1 ] || die "the slurm sweep should fail on one point (exit $rc)"
grep -q "submitted job array [0-9]*: 7 task(s)" "$out/run1.txt" || die "no job array submitted"
grep -q "failed: $bad: FAILED, exit 2: kelle-vp: error: command line -p workload.batch=0" "$out/run1.txt" \
  || die "the failed point is not listed with its Slurm state and error line"
ls "$out"/slurm/slurm/job-*.sh >/dev/null || die "no job script in the results folder"
same_csv "$out/local/results.csv" "$out/slurm/results.csv"

step "a second call runs nothing"
rc=0; sweep --kelle-vp "$vp" >"$out/run2.txt" 2>&1 || rc=$?
grep -q "6 already done, 1 failed (--retry-failed runs them again), 0 to run" "$out/run2.txt" \
  || die "a second call should run nothing: $(head -1 "$out/run2.txt")"

step "cancel a running task (scancel), resume"
rm -rf "${out:?}/slurm/$a" "$out/slurm/$b"
# A slower simulator (the same binary after 4 s), so the task can be caught running.
printf '#!/bin/sh\nsleep 4\nexec %s "$@"\n' "$vp" >"$tmp/slow-vp"; chmod +x "$tmp/slow-vp"
sweep --kelle-vp "$tmp/slow-vp" --max-parallel 1 >"$out/run3.txt" 2>&1
job=$(sed -n 's/^submitted job array \([0-9]*\):.*/\1/p' "$out/run3.txt")
[ -n "$job" ] || die "no job id printed: $(cat "$out/run3.txt")"
# Running means the point has started: Slurm says RUNNING a moment before the job script writes
# the point's status, and a task cancelled in that moment is, rightly, "cancelled before it started".
started() { [ "$(task_state "${job}_0")" = RUNNING ] && grep -q "^running ${job}_0 " "$out/slurm/$a/status" 2>/dev/null; }
for i in $(seq 100); do started && break; sleep 0.2; done
started || die "task ${job}_0 did not start its point $a"
scancel "${job}_0"
for i in $(seq 100); do [ "$(task_state "${job}_0")" = CANCELLED ] && break; sleep 0.2; done
rc=0; sweep --collect >"$out/collect.txt" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || die "--collect with a point missing should exit 1 (exit $rc)"
grep -q "missing: $a: cancelled while running (CANCELLED)" "$out/collect.txt" \
  || die "the cancelled point is not listed as cancelled: $(cat "$out/collect.txt")"
grep -q "failed: $bad: FAILED, exit 2" "$out/collect.txt" || die "--collect does not list the failed point"
rc=0; sweep --kelle-vp "$vp" --wait >"$out/run4.txt" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || die "the resumed sweep still has the failed point (exit $rc)"
grep -q "1 to run as 1 array task(s)" "$out/run4.txt" || die "the resume should submit the cancelled point only: $(head -1 "$out/run4.txt")"
test -s "$out/slurm/$a/results.json" && test -s "$out/slurm/$b/results.json" || die "resume left points missing"
# $b ran in the first submission's task 1, and not in the resume's.
grep -q "^exit 0 ${job}_1 " "$out/slurm/$b/status" || die "$b did not run in task ${job}_1"
job4=$(sed -n 's/^submitted job array \([0-9]*\):.*/\1/p' "$out/run4.txt")
! grep -q "^$b:" "$out"/slurm/slurm/"${job4}"_*.out || die "$b ran twice"
same_csv "$out/local/results.csv" "$out/slurm/results.csv"

step "retry the failed point"
rc=0; sweep --kelle-vp "$vp" --retry-failed --wait >"$out/run5.txt" 2>&1 || rc=$?
grep -q "6 already done, 1 to run as 1 array task(s)" "$out/run5.txt" || die "--retry-failed should submit the failed point only: $(head -1 "$out/run5.txt")"
rjob=$(sed -n 's/^submitted job array \([0-9]*\):.*/\1/p' "$out/run5.txt")
grep -q "^exit 2 ${rjob}_0 " "$out/slurm/$bad/status" || die "the retry did not run $bad"
[ "$rc" -eq 1 ] && grep -q "failed: $bad:" "$out/run5.txt" || die "the retried point (batch 0) fails again and is listed"

step "a point's lock is respected"
exec 8>"$out/slurm/$a/.lock"
flock -n 8 || die "cannot take the lock of $a"
before=$(cat "$out/slurm/$a/status")
rc=0; sweep --kelle-vp "$vp" --force --max-parallel 2 --wait >"$out/run6.txt" 2>&1 || rc=$?
exec 8>&-
fjob=$(sed -n 's/^submitted job array \([0-9]*\):.*/\1/p' "$out/run6.txt")
grep -q "^$a: skipped, running in another task" "$out/slurm/slurm/${fjob}_0.out" || die "the locked point $a was run"
[ "$(cat "$out/slurm/$a/status")" = "$before" ] || die "the locked point's status changed"
grep -q "^exit 0 ${fjob}_" "$out/slurm/$b/status" || die "--force did not run $b again"

step "a job script resubmitted by hand, with the binary missing on the node"
sed "s|^KELLE_VP=.*|KELLE_VP=$tmp/no-such-kelle-vp|" "$out/slurm/slurm/job-$rjob.sh" >"$tmp/edited.sh"
sbatch --wait "$tmp/edited.sh" >/dev/null 2>&1 || true
rc=0; sweep --collect >"$out/collect2.txt" 2>&1 || rc=$?
grep -q "failed: $bad: FAILED, exit 127: sweep: error: kelle-vp missing on node .*no-such-kelle-vp is not an executable" \
  "$out/collect2.txt" || die "a missing binary is not reported in one line: $(grep "$bad" "$out/collect2.txt")"
same_csv "$out/local/results.csv" "$out/slurm/results.csv"

step "a design-space search: two array tasks screen on one shared study"
space=$here/explore_tiny.yaml
rc=0; "$src/scripts/explore" "$space" --backend slurm --workers 2 --trials 24 --no-simulate --out "$out/explore" \
  --kelle-vp "$vp" --time 5 >"$out/explore.txt" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || die "the search through Slurm failed (exit $rc): $(tail -3 "$out/explore.txt")"
grep -q "submitted job array [0-9]*: 2 task(s)" "$out/explore.txt" || die "the search's workers were not one job array of 2 tasks"
/usr/bin/python3 - "$out/explore" <<'PY'
import csv, json, sys
d = sys.argv[1]
told = [json.load(open(f"{d}/workers/explore_worker-{i}/results.json"))["trials_told"] for i in (0, 1)]
rows = list(csv.DictReader(open(f"{d}/trials.csv")))
# Both array tasks opened the shared study and reported; how the 24 trials split between them is
# the scheduler's timing (a task that starts late may find them all told), so only the sum is checked.
assert all(t >= 0 for t in told), f"each array task reports the trials it told: {told}"
assert sum(told) >= 24, f"the tasks told {told} trials, expected 24 in all"
# Then the front's neighbours, estimated by the search itself (polish), join the same study.
assert len(rows) >= sum(told), f"the tasks told {told}, the study holds {len(rows)}"
print(f"search through Slurm: 2 array tasks told {told} trials to one journal ({len(rows)} trials with the polish)")
PY
echo "slurm backend: ok"
