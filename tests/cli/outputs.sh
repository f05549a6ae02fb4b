#!/usr/bin/env bash
# outputs.sh KELLE_VP SCENARIOS WORK: a user's files are never lost. A rejected run leaves the
# files it was asked to write as they were (with --force too); a run interrupted by SIGINT leaves
# the old file or nothing (no truncated JSON, no temporary file); a completed run replaces them.
set -u
vp=$1; sc=$2; work=$3
rm -rf "$work"; mkdir -p "$work/o"
fail() { echo "FAIL: $*"; exit 1; }
stream="$sc/microbench/dram_stream.yaml"
echo '{"old": "timeline"}' >"$work/t.json"
echo '{"old": "results"}' >"$work/o/results.json"
cp "$stream" "$work/my.yaml"
cmp_old() { grep -q '"old"' "$1" || fail "$2: $1 was overwritten"; }

# 1. a rejected scenario with --force: both outputs untouched
"$vp" run "$stream" -p workload.batchs=1 --timeline "$work/t.json" -o "$work/o" --force >/dev/null 2>&1 && fail "typo accepted"
cmp_old "$work/t.json" "rejected run"; cmp_old "$work/o/results.json" "rejected run"
# 2. --timeline naming the scenario itself: refused, the scenario intact
"$vp" run "$work/my.yaml" --timeline "$work/my.yaml" --force >/dev/null 2>&1 && fail "--timeline over the scenario accepted"
cmp -s "$stream" "$work/my.yaml" || fail "the scenario was overwritten"
# 3. an input error found while the platform is built (a bad target) with --force
"$vp" run "$stream" -p workload.target=hbm --timeline "$work/t.json" -o "$work/o" --force >/dev/null 2>&1 && fail "bad target accepted"
cmp_old "$work/t.json" "elaboration error"; cmp_old "$work/o/results.json" "elaboration error"
# 4. SIGINT in the middle of a long run: the old files stay, no temporary file is left
"$vp" run "$stream" -q -p workload.total_bytes=4e11 --timeline "$work/t.json" -o "$work/o" --force >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do ls -a "$work" | grep -q '\.t\.json\.tmp' && break; sleep 0.1; done
ls -a "$work" | grep -q '\.t\.json\.tmp' || { kill $pid; fail "no temporary timeline file while running"; }
kill -INT $pid; wait $pid; rc=$?
[ $rc -ne 0 ] || fail "an interrupted run exited 0"
cmp_old "$work/t.json" "SIGINT"; cmp_old "$work/o/results.json" "SIGINT"
ls -a "$work" "$work/o" | grep -q '\.tmp' && fail "a temporary file was left: $(ls -a "$work" "$work/o")"
# 5. SIGINT with no old timeline: nothing is left where the timeline was asked for
"$vp" run "$stream" -q -p workload.total_bytes=4e11 --timeline "$work/new/t.json" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do ls -a "$work/new" 2>/dev/null | grep -q '\.tmp' && break; sleep 0.1; done
kill -INT $pid; wait $pid
[ -e "$work/new/t.json" ] && fail "an interrupted run left $work/new/t.json"
ls -a "$work/new" | grep -q '\.tmp' && fail "a temporary file was left in $work/new"
# 6. a write that fails (files limited to 20 KiB: results.json is larger, the timeline is not): an
# error with the file and the system's reason (exit status 2); every output stays as it was (the
# timeline, written in full, is not renamed either) and no temporary file is left
(ulimit -f 20; trap '' XFSZ; exec "$vp" run "$stream" -q -p workload.total_bytes=65536 --timeline "$work/t.json" \
  -o "$work/o" --force) >"$work/full.out" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "a failed write exited $rc: $(cat "$work/full.out")"
grep -q "^kelle-vp: error: -o $work/o/results.json: cannot write the file (File too large)$" "$work/full.out" \
  || fail "no write error: $(cat "$work/full.out")"
cmp_old "$work/t.json" "failed write"; cmp_old "$work/o/results.json" "failed write"
ls -a "$work" "$work/o" | grep -q '\.tmp' && fail "a temporary file was left after a failed write"
[ -e "$work/o/report.txt" ] && fail "a failed write left report.txt"
# 7. the report on a full stdout: an error, not a silent loss
"$vp" run "$stream" -p workload.total_bytes=65536 >/dev/full 2>"$work/stdout.err"; rc=$?
[ $rc -eq 2 ] || fail "a report on a full stdout exited $rc"
grep -q "^kelle-vp: error: stdout: cannot write the output (No space left on device)$" "$work/stdout.err" \
  || fail "no stdout error: $(cat "$work/stdout.err")"
# 8. a completed run replaces both, with valid JSON and no temporary file
"$vp" run "$stream" -q -p workload.total_bytes=65536 --timeline "$work/t.json" -o "$work/o" --force >/dev/null 2>&1 \
  || fail "the run failed"
python3 -c "import json,sys; json.load(open(sys.argv[1])); json.load(open(sys.argv[2]))" "$work/t.json" "$work/o/results.json" \
  || fail "invalid JSON written"
grep -q '"old"' "$work/t.json" "$work/o/results.json" && fail "the old files were not replaced"
ls -a "$work" "$work/o" | grep -q '\.tmp' && fail "a temporary file was left after a complete run"
echo ok
