"""The Slurm backend of scripts/sweep: a study as one job array (docs/studies.md, "Running a study
on a Slurm cluster").

A submission writes OUT/slurm/job-<id>.sh (the job script: every point's command, readable,
editable, resubmittable with sbatch) and appends it to OUT/slurm/submissions.jsonl. Array task i
runs points i*CHUNK .. i*CHUNK+CHUNK-1 of the script's list; each point, under a lock of its own
(OUT/<point>/.lock), writes OUT/<point>/log.txt, results.json and status (one line: `running JOB
HOST`, `exit RC JOB HOST SECONDS`, or `killed JOB HOST [signal N]`). What a point is comes from those files
and from Slurm (sacct when accounting is on, squeue otherwise; the terminal states seen are kept
in OUT/slurm/states.json):

  done     results.json exists
  queued   its latest task is pending or running
  failed   its last attempt ended with a non-zero exit, or Slurm ended the task while it ran
           (TIMEOUT, OUT_OF_MEMORY, FAILED, NODE_FAIL, ...); --retry-failed submits these again
  missing  never run, cancelled, or interrupted without a record; any later call submits these
"""
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

from .cli import fail

IN_FLIGHT = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
             "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD"}
FAILED_STATES = {"FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                 "DEADLINE"}
TIME_RE = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2})$")
MEM_RE = re.compile(r"^\d+[KMGT]?$")
NAME_RE = re.compile(r"^[A-Za-z0-9_.,@%+=:-]+$")
POLL_S = float(os.environ.get("SWEEP_SLURM_POLL_S", "2"))


def error(msg):
    """An option or a cluster that cannot take the study: one line, exit status 2 (cli.fail)."""
    fail(msg)


def check_options(args):
    """Every Slurm option: one line naming it and what was expected."""
    if args.time is not None and not TIME_RE.match(args.time):
        error(f"--time: expected a Slurm time limit (MINUTES, HH:MM:SS, D-HH:MM:SS ...), got '{args.time}'")
    if args.mem is not None and not MEM_RE.match(args.mem):
        error(f"--mem: expected memory per node as a number with an optional K, M, G or T (e.g. 4G), got '{args.mem}'")
    for opt, v in (("--partition", args.partition), ("--account", args.account)):
        if v is not None and not NAME_RE.match(v):
            error(f"{opt}: expected a Slurm name (letters, digits, _ . , - ...), got '{v}'")
    for opt, v in (("--cpus-per-task", args.cpus_per_task), ("--max-parallel", args.max_parallel),
                   ("--chunk", args.chunk)):
        if v is not None and v < 1:
            error(f"{opt}: expected a whole number >= 1, got {v}")
    if args.collect and (args.retry_failed or args.dry_run):
        error("--collect: gathers results only; not with --retry-failed or --dry-run")


# ---------------------------------------------------------------- the job script

SCRIPT_BODY = r'''
# What one array task does: points TASK*CHUNK .. TASK*CHUNK+CHUNK-1 of the list, one after another.
task=${SLURM_ARRAY_TASK_ID:?submit this script with sbatch: it runs as a job array}
job="${SLURM_ARRAY_JOB_ID:-0}_$task"
host=$(hostname)
first=$((task * CHUNK))
last=$((first + CHUNK - 1))
[ "$last" -lt "${#POINTS[@]}" ] || last=$((${#POINTS[@]} - 1))

# A point the task cannot run: its log and status say why, in one line.
refuse() {  # $1 point index, $2 the reason
  local dir=$OUT/${POINTS[$1]}
  echo "sweep: error: ${POINTS[$1]}: $2" >&2
  if mkdir -p "$dir" 2>/dev/null && [ ! -f "$dir/results.json" ]; then
    echo "sweep: error: $2" >"$dir/log.txt"
    echo "exit 127 $job $host 0" >"$dir/status"
  fi
}
if [ ! -x "$KELLE_VP" ] || [ ! -f "$BASE" ]; then
  if [ ! -x "$KELLE_VP" ]; then
    why="kelle-vp missing on node $host: $KELLE_VP is not an executable (build or cmake --install it on a file system the nodes share; scripts/sweep --kelle-vp PATH)"
  else
    why="scenario missing on node $host: $BASE not found (keep the repository on a file system the nodes share)"
  fi
  for ((i = first; i <= last; i++)); do refuse "$i" "$why"; done
  exit 2
fi

current=
trap 'if [ -n "$current" ]; then echo "killed $job $host" >"$current/status"; fi; exit 143' TERM

run_point() {  # $1 point index; returns the simulator's exit status
  local id=${POINTS[$1]} dir=$OUT/${POINTS[$1]} rc t0
  mkdir -p "$dir" || { refuse "$1" "cannot create $dir on $host"; return 1; }
  exec 9>"$dir/.lock"
  if ! flock -n 9; then  # another task (another sweep of the same study) runs this point now
    echo "$id: skipped, running in another task (lock $dir/.lock held)"
    exec 9>&-; return 0
  fi
  if [ "$FORCE" = 0 ] && [ -f "$dir/results.json" ]; then
    echo "$id: already done"; exec 9>&-; return 0
  fi
  rm -f "$dir/results.json"
  point_args "$1"
  echo "running $job $host" >"$dir/status"
  current=$dir
  t0=$(date +%s)
  "$KELLE_VP" run "$BASE" -o "$dir" --force \
    "${COMMON[@]}" "${ARGS[@]}" "${EXTRA[@]}" >"$dir/log.txt" 2>&1 &
  wait $!
  rc=$?
  current=
  if [ "$rc" -gt 128 ]; then  # killed by a signal: Slurm's state (TIMEOUT, CANCELLED ...) says why
    echo "killed $job $host signal $((rc - 128))" >"$dir/status"
  else
    echo "exit $rc $job $host $(($(date +%s) - t0))" >"$dir/status"
  fi
  if [ "$rc" -eq 0 ]; then echo "$id: ok"; else echo "$id: FAILED (exit $rc): $(grep -v '^\s*$' "$dir/log.txt" | tail -1)"; fi
  exec 9>&-
  return "$rc"
}

status=0
for ((i = first; i <= last; i++)); do run_point "$i" || status=1; done
exit "$status"
'''


def job_script(study, sel, args, vp, out):
    """The job script that runs the points `sel` (indices into study.jobs) as a job array."""
    q = shlex.quote
    tasks = math.ceil(len(sel) / args.chunk)
    array = f"0-{tasks - 1}" + (f"%{args.max_parallel}" if args.max_parallel else "")
    slurm = os.path.join(out, "slurm")
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name=sweep-{study.name}",
             f"#SBATCH --array={array}",
             f"#SBATCH --output={slurm}/%A_%a.out"]
    for opt, v in (("partition", args.partition), ("account", args.account), ("time", args.time),
                   ("mem", args.mem), ("cpus-per-task", args.cpus_per_task)):
        if v is not None:
            lines.append(f"#SBATCH --{opt}={v}")
    lines += [
        "#",
        f"# Study {study.name} ({study.path}): {len(sel)} point(s), {args.chunk} per array task.",
        "# Written by scripts/sweep --backend slurm. Each point runs",
        "#   $KELLE_VP run $BASE -o $OUT/<point> --force COMMON POINT EXTRA",
        "# into $OUT/<point>/ (log.txt, results.json, status), under a lock of its own. Edit and",
        "# resubmit with `sbatch THIS_FILE` (keep --array at 0-(tasks-1)); then",
        f"#   scripts/sweep {study.path} --backend slurm --out {out} --collect",
        "# gathers results.csv.",
        "",
        f"KELLE_VP={q(vp)}",
        f"BASE={q(study.base)}",
        f"OUT={q(out)}",
        f"CHUNK={args.chunk}",
        f"FORCE={1 if args.force else 0}   # 1: run points whose results.json exists again",
    ]
    scen = os.environ.get("KELLE_VP_SCENARIOS")
    if scen:
        lines.append(f"export KELLE_VP_SCENARIOS={q(scen)}")
    lines.append("# The study's overrides (every point), then the command line's --overlay and -p (EXTRA).")
    lines.append("COMMON=(" + " ".join(f"-p {q(o)}" for o in study.overrides) + ")")
    lines.append("EXTRA=(" + " ".join(q(a) for a in study.extra) + ")")
    lines.append("")
    lines.append("POINTS=(")
    for n, i in enumerate(sel):
        lines.append(f"  {q(study.jobs[i][1])}   # {n}")
    lines.append(")")
    lines.append("point_args() {  # the overrides of point $1")
    lines.append("  case $1 in")
    for n, i in enumerate(sel):
        lines.append(f"    {n}) ARGS=(" + " ".join(f"-p {q(o)}" for o in study.point_overrides(i)) + ") ;;")
    lines.append("  esac")
    lines.append("}")
    return "\n".join(lines) + "\n" + SCRIPT_BODY


# ---------------------------------------------------------------- Slurm's view

def run_tool(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, "", str(e)
    return p.returncode, p.stdout, p.stderr


def query_states(job_ids):
    """Task id ("12_3") -> Slurm state, from sacct (if accounting is on) and squeue (live jobs)."""
    states = {}
    ids = sorted({j for j in job_ids if j}, key=lambda j: int(j) if j.isdigit() else 0)
    if not ids:
        return states
    if shutil.which("sacct"):
        rc, out, _ = run_tool(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State"])
        if rc == 0:
            for line in out.splitlines():
                parts = line.split("|")
                if len(parts) >= 2 and re.match(r"^\d+_\d+$", parts[0]):
                    states[parts[0]] = parts[1].split()[0] if parts[1] else "UNKNOWN"
    if shutil.which("squeue"):
        for j in ids:  # one at a time: squeue refuses the whole list if one id is gone
            rc, out, _ = run_tool(["squeue", "-h", "-r", "-t", "all", "-j", j, "-o", "%i|%T"])
            if rc != 0:
                continue
            for line in out.splitlines():
                parts = line.strip().split("|")
                if len(parts) == 2 and re.match(r"^\d+_\d+$", parts[0]):
                    states[parts[0]] = parts[1]
    return states


class Records:
    """OUT/slurm: the submissions (which task ran which point) and the terminal states seen."""

    def __init__(self, out):
        self.dir = os.path.join(out, "slurm")
        self.subs = []
        self.seen = {}
        try:
            with open(os.path.join(self.dir, "submissions.jsonl")) as f:
                self.subs = [json.loads(l) for l in f if l.strip()]
        except (OSError, ValueError):
            pass
        try:
            with open(os.path.join(self.dir, "states.json")) as f:
                self.seen = json.load(f)
        except (OSError, ValueError):
            pass

    def latest_task(self, pid):
        """The task of the latest submission that holds point pid ("12_3"), or None."""
        for s in reversed(self.subs):
            if pid in s["points"]:
                return f"{s['job']}_{s['points'].index(pid) // s['chunk']}"
        return None

    def add(self, job, script, chunk, pids):
        os.makedirs(self.dir, exist_ok=True)
        rec = {"job": job, "script": script, "chunk": chunk, "points": pids, "submitted": time.time()}
        self.subs.append(rec)
        with open(os.path.join(self.dir, "submissions.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")

    def save_states(self, states):
        changed = False
        for t, s in states.items():
            if s not in IN_FLIGHT and self.seen.get(t) != s:
                self.seen[t] = s
                changed = True
        if changed and os.path.isdir(self.dir):
            tmp = os.path.join(self.dir, "states.json.tmp")
            with open(tmp, "w") as f:
                json.dump(self.seen, f, indent=1, sort_keys=True)
            os.replace(tmp, os.path.join(self.dir, "states.json"))


def read_status(folder):
    try:
        with open(os.path.join(folder, "status")) as f:
            return f.read().split()
    except OSError:
        return []


def last_line(folder):
    try:
        with open(os.path.join(folder, "log.txt"), errors="replace") as f:
            lines = [l.strip() for l in f if l.strip()]
        return lines[-1] if lines else ""
    except OSError:
        return ""


def outcome(state, job, failed, when, other):
    """A point that did not finish, by its job's Slurm state: failed (a state of FAILED_STATES),
    cancelled (then missing: run again) or otherwise not done (missing)."""
    if state in FAILED_STATES:
        return ("failed", failed, job)
    if state == "CANCELLED":
        return ("missing", f"cancelled {when} (CANCELLED)", job)
    return ("missing", other, job)


def classify(study, rec, states=None):
    """Per point: (kind, note, task): kind done | queued | failed | missing."""
    tasks = {}
    for p, pid, folder, _ in study.jobs:
        st = read_status(folder)
        tasks[pid] = (rec.latest_task(pid), st[2] if len(st) >= 3 and st[0] == "exit" else
                      (st[1] if len(st) >= 2 else None))
    if states is None:
        states = query_states({t.split("_")[0] for pair in tasks.values() for t in pair if t})
    rec.save_states(states)
    known = {**rec.seen, **states}
    result = {}
    for p, pid, folder, _ in study.jobs:
        latest, ran = tasks[pid]
        if os.path.isfile(os.path.join(folder, "results.json")):
            result[pid] = ("done", "", ran or latest)
            continue
        live = [t for t in (latest, ran) if t and known.get(t) in IN_FLIGHT]
        if live:
            result[pid] = ("queued", known[live[0]].lower(), live[0])
            continue
        st = read_status(folder)
        state = known.get(ran) if ran else None
        if st and st[0] == "exit":
            rc = st[1] if len(st) > 1 else "?"
            slurm = f"{state}, " if state and state != "COMPLETED" else ""
            result[pid] = ("failed", f"{slurm}exit {rc}: {last_line(folder) or 'no log'}", ran)
        elif st and st[0] in ("running", "killed"):
            sig = f" (signal {st[4]})" if len(st) >= 5 and st[3] == "signal" else ""
            result[pid] = outcome(state, ran, f"{state}{sig}: {last_line(folder) or 'no log'}", "while running",
                                  f"interrupted ({state or 'no Slurm record'})")
        elif latest:
            state = known.get(latest)
            result[pid] = outcome(state, latest, f"{state} before it started (see {rec.dir}/{latest}.out)",
                                  "before it started", f"not run ({state or 'no Slurm record'})")
        else:
            result[pid] = ("missing", "not run", None)
    return result


def counts(kinds):
    c = {"done": 0, "queued": 0, "failed": 0, "missing": 0}
    for k, _, _ in kinds.values():
        c[k] += 1
    return c


def report(study, kinds, t0):
    """results.csv from what is there, then the points not done, with why."""
    study.write_results(t0)
    bad = 0
    for p, pid, folder, _ in study.jobs:
        kind, note, task = kinds[pid]
        if kind in ("failed", "missing"):
            bad += kind == "failed"
            where = f" [task {task}]" if task else ""
            print(f"  {kind}: {pid}: {note}{where}", file=sys.stderr)
        elif kind == "queued":
            print(f"  queued: {pid}: {note} [task {task}]", file=sys.stderr)
    return bad


# ---------------------------------------------------------------- submit and follow

def submit(study, sel, args, vp, out, rec):
    os.makedirs(rec.dir, exist_ok=True)
    text = job_script(study, sel, args, vp, out)
    tmp = os.path.join(rec.dir, f"job-new-{os.getpid()}.sh")
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    rc, so, se = run_tool(["sbatch", "--parsable", tmp])
    if rc != 0:
        os.unlink(tmp)
        msg = (se.strip().splitlines() or [f"exit status {rc}"])[-1]
        error(f"--backend slurm: sbatch refused the job array: {msg}")
    job = so.strip().split(";")[0]
    script = os.path.join(rec.dir, f"job-{job}.sh")
    os.replace(tmp, script)
    pids = [study.jobs[i][1] for i in sel]
    rec.add(job, script, args.chunk, pids)
    return job, script


def follow(study, rec, pids, t0):
    """Polls Slurm until no point of pids is queued; prints progress as it changes."""
    last = None
    finished_at = {}
    total = len(pids)
    while True:
        kinds = classify(study, rec)
        mine = {p: kinds[p] for p in pids}
        pending = sum(1 for k in mine.values() if k[0] == "queued" and k[1] == "pending")
        running = sum(1 for k in mine.values() if k[0] == "queued" and k[1] != "pending")
        c = counts(mine)
        for p, (kind, note, _) in mine.items():
            if kind != "queued" and p not in finished_at:
                finished_at[p] = time.time()
        ended = len(finished_at)
        el = time.time() - t0
        eta = el / ended * (total - ended) if ended else float("nan")
        line = (f"  [{ended}/{total}] pending {pending}, running {running}, done {c['done']}, "
                f"failed {c['failed']}" + (f", missing {c['missing']}" if c["missing"] else ""))
        if line != last:
            rem = f"remaining ~{eta:.0f} s" if ended else "remaining: unknown yet"
            print(f"{line}   elapsed {el:.0f} s, {rem}", flush=True)
            last = line
        if pending + running == 0:
            return kinds
        time.sleep(POLL_S)


def main(study, args):
    check_options(args)
    out = os.path.abspath(study.out)
    vp = os.path.abspath(args.kelle_vp)
    rec = Records(out)
    have_slurm = shutil.which("sbatch") is not None
    if not (args.dry_run or args.collect) and not have_slurm:
        error("--backend slurm: sbatch not found (run on a Slurm login node, or use --backend local)")
    t0 = time.time()
    kinds = classify(study, rec) if (have_slurm or not rec.subs) else classify(study, rec, {})
    c = counts(kinds)
    if args.collect:
        print(f"sweep {study.name}: {len(kinds)} scenarios: {c['done']} done, {c['queued']} in the queue, "
              f"{c['failed']} failed, {c['missing']} missing -> {out}")
        report(study, kinds, t0)
        return 0 if c["done"] == len(kinds) else 1

    idx = {pid: i for i, (_, pid, _, _) in enumerate(study.jobs)}
    want = {"missing"} | ({"failed"} if args.retry_failed else set()) | ({"done", "failed"} if args.force else set())
    sel = [idx[pid] for _, pid, _, _ in study.jobs if kinds[pid][0] in want]
    notes = [f"{c['done']} already done"]
    if c["queued"]:
        notes.append(f"{c['queued']} in the queue")
    if c["failed"] and not (args.retry_failed or args.force):
        notes.append(f"{c['failed']} failed (--retry-failed runs them again)")
    tasks = math.ceil(len(sel) / args.chunk) if sel else 0
    cap = f", at most {args.max_parallel} at once" if args.max_parallel else ""
    header = (f"sweep {study.name}: {len(kinds)} scenarios, {', '.join(notes)}, {len(sel)} to run "
              f"as {tasks} array task(s){cap} on Slurm -> {out}")
    if args.dry_run:
        print(header)
        if sel:
            print(f"--- job script ({os.path.join(out, 'slurm', 'job-<id>.sh')} once submitted)")
            print(job_script(study, sel, args, vp, out), end="")
            print("---")
        for _, pid, _, _ in study.jobs:
            kind, note, _ = kinds[pid]
            print(f"  {'run ' if idx[pid] in sel else 'skip'} {pid}  ({kind}{': ' + note if note else ''})")
        return study.check()  # every point through `kelle-vp check`, as the local backend does
    if sel and not os.access(vp, os.X_OK):
        error(f"--kelle-vp: {vp} is not an executable (build it on a file system the nodes share)")
    print(header, flush=True)
    os.makedirs(out, exist_ok=True)
    follow_ids = [pid for pid in kinds if kinds[pid][0] == "queued"]
    if sel:
        job, script = submit(study, sel, args, vp, out, rec)
        print(f"submitted job array {job}: {tasks} task(s), job script {script}", flush=True)
        follow_ids += [study.jobs[i][1] for i in sel]
    if not args.wait:
        if not sel:
            bad = report(study, kinds, t0)
            return 1 if bad else 0
        print(f"follow it: scripts/sweep {study.path} --backend slurm --out {out} --wait "
              f"(or --collect later)")
        return 0
    if follow_ids:
        kinds = follow(study, rec, follow_ids, t0)
    bad = report(study, kinds, t0)
    return 1 if bad else 0
