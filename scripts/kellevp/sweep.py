"""Runs a study: the scenarios of a study file, in parallel, collected into one CSV.

Usage: scripts/sweep STUDY.yaml [--workers N] [--out DIR] [--force] [--dry-run] [--kelle-vp PATH]
             [--overlay FILE] [-p KEY=VALUE]
       scripts/sweep STUDY.yaml --backend slurm [--partition P] [--account A] [--time T] [--mem M]
             [--cpus-per-task N] [--max-parallel K] [--chunk N] [--wait | --collect] [--retry-failed]

A study file (scenarios/studies/*.yaml, format in docs/studies.md) names a base scenario, fixed
overrides and axes; the runner runs one scenario per point of the axes' cartesian product
(`kelle-vp run BASE -p key=value ... -o OUT/<point>`), skips points whose results.json exists
unless --force, shows progress, and writes OUT/results.csv: one row per scenario, the axes as
columns, then the figures (latency, throughput, energy and its breakdown, DRAM traffic, refresh).

--backend local (the default) runs the points here on --workers processes. --backend slurm submits
them as one Slurm job array into the results folder (scripts/sweep_slurm.py; docs/studies.md,
"Running a study on a Slurm cluster").

A study file's `quality` section (base, overrides, keys) runs, after each point, the quality path
(a functional-mode scenario on the trained model, docs/quality.md) with the point's values of the
listed keys, into <point>/quality/; its `quality` figures join the point's row as quality.*
columns beside latency and energy (local backend).
"""
import argparse
import concurrent.futures as cf
import difflib
import itertools
import json
import os
import re
import subprocess
import sys
import time

from . import ROOT, study_file
from .cli import (add_kelle_vp, add_overlay, entry, fail, flat, overlay_argv, overlay_files, overrides_argv, parser,
                  run_argv, value_text, write_csv)

STUDY_KEYS = {"name", "description", "base", "overrides", "axes", "points", "quality"}
QUALITY_KEYS = {"base", "overrides", "keys"}


def load_study(path):
    try:
        s = study_file.load(path)
    except study_file.StudyFileError as e:
        fail(e.where, e.message)
    if not isinstance(s, dict):
        fail(path, "expected a map with keys base, overrides, axes")
    for k in s:
        if k not in STUDY_KEYS:
            near = difflib.get_close_matches(str(k), STUDY_KEYS, n=1)
            fail(path, f"unknown key '{k}'" + (f"; did you mean '{near[0]}'?" if near else "") +
                 f" (expected one of: {', '.join(sorted(STUDY_KEYS))})")
    if "base" not in s:
        fail(path, "missing key 'base' (the scenario every point starts from)")
    if not isinstance(s["base"], str) or not s["base"]:
        fail(path, f"base: expected a scenario file name, got {s['base']!r}")
    if "name" in s:
        n = s["name"]
        if not isinstance(n, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", n) or ".." in n:
            fail(path, f"name: expected a plain name (letters, digits, '_', '-', '.'; no '/' or '..'), got {n!r}")
    base = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), s["base"]))
    if os.path.isdir(base):
        fail(path, f"base: {base} is a folder, expected a scenario file")
    if not os.path.isfile(base):
        fail(path, f"base: file '{s['base']}' not found (looked at {base})")
    overrides = s.get("overrides") or {}
    if not isinstance(overrides, dict):
        fail(path, "overrides: expected a map of key.path: value")
    axes = s.get("axes") or {}
    if not isinstance(axes, dict) or not all(isinstance(v, list) and v for v in axes.values()):
        fail(path, "axes: expected a map of key.path: [values...] (each a non-empty list)")
    points = s.get("points")
    if points is not None and (not isinstance(points, list) or not all(isinstance(p, dict) for p in points)):
        fail(path, "points: expected a list of maps of key.path: value (a point each)")
    for what, keys in (("overrides", overrides), ("axes", axes)) + tuple(("points", p) for p in points or []):
        for k in keys:
            if not isinstance(k, str) or not k:
                fail(path, f"{what}: expected key.path names, got {k!r}")
    name = s.get("name") or os.path.splitext(os.path.basename(path))[0]
    return name, base, overrides, axes, points, load_quality(path, s.get("quality"))


def load_quality(path, q):
    """The study's `quality` section: None, or (scenario file, overrides, keys passed from each point)."""
    if q is None:
        return None
    if not isinstance(q, dict):
        fail(path, "quality: expected a map with keys base, overrides, keys")
    for k in q:
        if k not in QUALITY_KEYS:
            fail(path, f"quality: unknown key '{k}' (expected one of: {', '.join(sorted(QUALITY_KEYS))})")
    if not isinstance(q.get("base"), str) or not q["base"]:
        fail(path, "quality.base: expected the quality scenario's file name (e.g. ../functional/quality.yaml)")
    base = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), q["base"]))
    if not os.path.isfile(base):
        fail(path, f"quality.base: file '{q['base']}' not found (looked at {base})")
    overrides = q.get("overrides") or {}
    if not isinstance(overrides, dict) or not all(isinstance(k, str) and k for k in overrides):
        fail(path, "quality.overrides: expected a map of key.path: value")
    keys = q.get("keys") or []
    if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
        fail(path, "quality.keys: expected a list of key.path names (the point's values passed to the quality run)")
    return base, overrides, keys


def is_executable(path):
    """A file that can be run (a folder is not, whatever its x bit)."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


def expand(axes, points):
    """Every point: a dict key.path -> value (axes' product, each combined with every point)."""
    keys = list(axes)
    grid = [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))] or [{}]
    if points:
        return [{**g, **p} for g in grid for p in points]
    return grid


def point_id(point):
    if not point:
        return "base"
    parts = []
    for k, v in point.items():
        short = k.split(".")[-1]
        parts.append(f"{short}-{value_text(v)}")
    return "_".join(parts).replace("/", "-").replace(" ", "")


FIGURES = ["latency_s", "throughput", "traffic_bytes", "energy_breakdown_J", "refresh", "kv", "quality"]


def quality_of(result_path):
    """The quality columns of a point's quality run (its `quality` section, and the model it ran)."""
    with open(result_path) as f:
        r = json.load(f)
    llm = r.get("llm", {})
    row = {"quality.model": r.get("functional", {}).get("model"),
           "quality.positions": llm.get("context_len", 0) + llm.get("decode_len", 0)}
    row.update(flat(r.get("quality", {}), "quality"))
    return row


def row_of(point, result_path):
    with open(result_path) as f:
        r = json.load(f)
    row = {k: value_text(v) for k, v in point.items()}
    row["system"] = r.get("system", row.get("system", ""))
    llm = r.get("llm", {})
    for k in ("model", "batch", "context_len", "decode_len", "dram_overflow_bytes"):  # what the point ran
        if k in llm:
            row[f"llm.{k}"] = llm[k]
    for k in ("kv_policy", "refresh_policy"):  # the firmware it ran (the system's, or the scenario's)
        name = (llm.get("firmware") or {}).get(k, {}).get("name")
        if name:
            row[f"llm.{k}"] = name
    row["energy_J.total"] = r.get("energy_J", {}).get("total")
    row["energy_J.edram_refresh"] = r.get("energy_J", {}).get("edram_refresh")
    for sec in FIGURES:
        for k, v in flat(r.get(sec, {}), sec).items():
            row[k] = v
    # The first-order estimate beside each phase (docs/firmware.md, "Roofline"): its bound, what
    # bounds it, the simulated time over it; and the sampling's measured error bound.
    for phase, roof in (r.get("roofline") or {}).items():
        if roof:
            for k in ("bound_per_pass_s", "simulated_per_pass_s", "simulated_over_bound", "no_overlap_s", "bottleneck"):
                row[f"roofline.{phase}.{k}"] = roof.get(k)
            dram = roof.get("resources", {}).get(llm.get("dram", "dram"), {})
            if "achieved_GBps" in dram:
                row[f"roofline.{phase}.dram_achieved_GBps"] = dram["achieved_GBps"]
                row[f"roofline.{phase}.dram_sustainable_GBps"] = dram["sustainable_GBps"]
    for kind in ("decode", "layers"):
        check = (r.get("sampling") or {}).get(kind, {}).get("check", {})
        if check.get("time_error_max") is not None:
            row[f"sampling.{kind}.time_error_max"] = check["time_error_max"]
    row["wall_time_s"] = r.get("wall_time_s")
    row["simulated_time_s"] = r.get("simulated_time_s")
    return row


def dry_run(jobs, command, args):
    """Lists the commands and checks every point (check_points)."""
    for p, pid, folder, skip in jobs:
        print(("skip " if skip else "") + " ".join(command(p, folder)))
    return check_points(jobs, command, args)


def check_points(jobs, command, args):
    """Checks every point with `kelle-vp check` (load, validate and elaborate, no simulation);
    reports every bad point, not only the first. Both backends' --dry-run."""
    if not is_executable(args.kelle_vp):
        fail("--kelle-vp", f"{args.kelle_vp} is not an executable (build first: ./scripts/build)")

    def check(job):
        p, pid, folder, _ = job
        run_cmd = command(p, folder)  # kelle-vp run BASE -o FOLDER --force -p ... -p ...
        cmd = [run_cmd[0], "check", run_cmd[2]] + run_cmd[6:]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        return pid, r.returncode, (lines[-1] if lines else "")

    with cf.ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(check, jobs))
    bad = [(pid, rc, msg) for pid, rc, msg in results if rc != 0]
    for pid, rc, msg in bad:
        print(f"sweep: error: point {pid}: {msg or f'kelle-vp check exited with {rc}'}", file=sys.stderr)
    if bad:
        sys.exit(f"sweep: error: {len(bad)} of {len(jobs)} points are invalid (each listed above)")
    print(f"sweep: all {len(jobs)} points check (kelle-vp check)")
    return 0


@entry("sweep")
def main(argv):
    ap = parser("sweep", __doc__)
    ap.add_argument("study")
    ap.add_argument("--workers", type=int, help="scenarios run at once (default: cores; local backend)")
    ap.add_argument("--out", help="results folder (default: results/<study name>)")
    ap.add_argument("--force", action="store_true", help="run points whose results already exist again")
    ap.add_argument("--dry-run", action="store_true", help="list the commands (slurm: the job script) and stop")
    add_kelle_vp(ap)
    ap.add_argument("-p", action="append", default=[], metavar="KEY=VALUE", help="an override for every point")
    add_overlay(ap)
    sl = ap.add_argument_group("Slurm backend (--backend slurm)")
    ap.add_argument("--backend", choices=["local", "slurm"], default="local",
                    help="local: run here (default); slurm: submit one job array")
    sl.add_argument("--partition", help="sbatch --partition")
    sl.add_argument("--account", help="sbatch --account")
    sl.add_argument("--time", help="sbatch --time per array task (e.g. 30, 2:00:00, 1-00:00:00)")
    sl.add_argument("--mem", help="sbatch --mem per array task (e.g. 4G)")
    sl.add_argument("--cpus-per-task", type=int, help="sbatch --cpus-per-task (the simulator uses one)")
    sl.add_argument("--max-parallel", type=int, help="array tasks running at once (--array=...%%K)")
    sl.add_argument("--chunk", type=int, default=1, help="points per array task (default 1)")
    sl.add_argument("--wait", action="store_true", help="follow the job array until it ends, then collect")
    sl.add_argument("--collect", action="store_true", help="only gather results.csv and list the points not done")
    sl.add_argument("--retry-failed", action="store_true", help="submit the failed points again")
    args = ap.parse_args(argv)
    slurm_only = [o for o, v in (("--partition", args.partition), ("--account", args.account),
                                 ("--time", args.time), ("--mem", args.mem),
                                 ("--cpus-per-task", args.cpus_per_task),
                                 ("--max-parallel", args.max_parallel), ("--chunk", args.chunk != 1),
                                 ("--wait", args.wait), ("--collect", args.collect),
                                 ("--retry-failed", args.retry_failed)) if v]
    if args.backend == "local" and slurm_only:
        fail(slurm_only[0], "only with --backend slurm")
    if args.backend == "slurm" and args.workers is not None:
        fail("--workers", "only with --backend local (with slurm, --max-parallel caps the running tasks)")
    if args.workers is None:
        args.workers = os.cpu_count() or 1
    if args.workers < 1:
        fail("--workers", "expected a whole number >= 1")
    overlays = overlay_files(args.overlay)
    name, base, overrides, axes, points, quality = load_study(args.study)
    if quality and args.backend == "slurm":
        fail(args.study, "quality: only with --backend local")
    out = args.out or os.path.join(ROOT, "results", name)
    todo = expand(axes, points)
    ids = [point_id(p) for p in todo]
    if len(set(ids)) != len(ids):
        fail(args.study, "two points have the same name; give the axes distinct values")
    if args.backend == "local" and not args.dry_run and not is_executable(args.kelle_vp):
        fail("--kelle-vp", f"{args.kelle_vp} is not an executable (build first: ./scripts/build)")

    def command(point, folder):
        # The run's output goes to its log file, not a terminal: no progress lines (and no
        # workload key that a workload without progress, such as traffic, would refuse).
        return run_argv(args.kelle_vp, base, folder, list(overrides.items()) + list(point.items()) + args.p,
                        overlays=overlays)

    def quality_command(point, folder):
        """The quality run of a point: the quality scenario, its overrides, then the point's (and
        the study's) values of the quality keys."""
        qbase, qover, keys = quality
        given = {**overrides, **point}
        return run_argv(args.kelle_vp, qbase, os.path.join(folder, "quality"),
                        list(qover.items()) + [(k, given[k]) for k in keys if k in given])

    def complete(folder):
        """A point is done when its results exist and were made with the same --overlay files (a
        folder of a run without them, or with others, runs again)."""
        rp = os.path.join(folder, "results.json")
        if not os.path.isfile(rp) or (quality and not os.path.isfile(os.path.join(folder, "quality", "results.json"))):
            return False
        try:
            with open(rp) as f:
                made_with = json.load(f).get("scenario", {}).get("overlays", [])
        except (OSError, ValueError):
            return False
        return made_with == overlays

    jobs = []
    for p, pid in zip(todo, ids):
        folder = os.path.join(out, pid)
        jobs.append((p, pid, folder, complete(folder) and not args.force))

    def write_results(t0):
        rows = []
        for p, pid, folder, _ in jobs:
            rp = os.path.join(folder, "results.json")
            if os.path.isfile(rp):
                row = {"scenario": pid}
                row.update(row_of(p, rp))
                qp = os.path.join(folder, "quality", "results.json")
                if quality and os.path.isfile(qp):
                    row.update(quality_of(qp))
                rows.append(row)
        csv_path = os.path.join(out, "results.csv")
        write_csv(csv_path, rows)
        print(f"sweep {name}: {len(rows)} results in {csv_path} ({time.time() - t0:.0f} s)")

    if args.backend == "slurm":
        from . import sweep_slurm
        study = argparse.Namespace(
            name=name, path=os.path.abspath(args.study), base=base, out=out, jobs=jobs, extra=overlay_argv(overlays) + overrides_argv(args.p),
            overrides=[f"{k}={value_text(v)}" for k, v in overrides.items()],
            point_overrides=lambda i: [f"{k}={value_text(v)}" for k, v in jobs[i][0].items()],
            write_results=write_results, check=lambda: check_points(jobs, command, args))
        return sweep_slurm.main(study, args)
    if args.dry_run:
        if quality:  # the quality runs too
            dry_run(jobs, quality_command, args)
        return dry_run(jobs, command, args)
    os.makedirs(out, exist_ok=True)
    pending = [j for j in jobs if not j[3]]
    print(f"sweep {name}: {len(jobs)} scenarios, {len(jobs) - len(pending)} already done, "
          f"{len(pending)} to run on {args.workers} worker(s) -> {out}", flush=True)
    t0 = time.time()
    failures = []

    def run(job):
        p, pid, folder, _ = job
        log_path = os.path.join(folder, "log.txt")
        try:
            os.makedirs(folder, exist_ok=True)
            with open(log_path, "w") as log:
                rc = subprocess.call(command(p, folder), stdout=log, stderr=subprocess.STDOUT)
            if rc == 0 and quality:
                log_path = os.path.join(folder, "quality", "log.txt")
                os.makedirs(os.path.dirname(log_path), exist_ok=True)
                with open(log_path, "w") as log:
                    rc = subprocess.call(quality_command(p, folder), stdout=log, stderr=subprocess.STDOUT)
                if rc != 0:
                    with open(log_path) as log:
                        last = [l.strip() for l in log if l.strip()]
                    return pid, folder, rc, "quality run: " + (last[-1] if last else f"exit status {rc}")
        except OSError as e:  # a full disk, a folder that cannot be made: the point fails, with why
            return pid, folder, 2, f"{e.filename or log_path}: cannot write the file ({e.strerror or e})"
        return pid, folder, rc, None

    finished = 0
    with cf.ThreadPoolExecutor(max_workers=args.workers) as ex:
        for fut in cf.as_completed([ex.submit(run, j) for j in pending]):
            pid, folder, rc, why = fut.result()
            finished += 1
            if rc != 0 and why is None:
                try:
                    with open(os.path.join(folder, "log.txt")) as log:
                        last = [l.strip() for l in log if l.strip()]
                except OSError:
                    last = []
                why = last[-1] if last else f"exit status {rc}"
            if rc != 0:
                failures.append((pid, why))
            el = time.time() - t0
            eta = el / finished * (len(pending) - finished)
            print(f"  [{finished}/{len(pending)}] {pid}: {'ok' if rc == 0 else 'FAILED'}   "
                  f"elapsed {el:.0f} s, remaining ~{eta:.0f} s", flush=True)

    write_results(t0)
    for pid, msg in failures:
        print(f"  failed: {pid}: {msg}", file=sys.stderr)
    return 1 if failures else 0

