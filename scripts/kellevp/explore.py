"""Searches a design space: the designs worth building, screened with the first-order estimate
(`kelle-vp estimate`), the ones near the front simulated (`kelle-vp run`, through scripts/sweep),
the final Pareto front simulated in full (docs/explore.md).

Usage: scripts/explore SPACE.yaml [--out DIR] [--trials N] [--workers N] [--sampler S] [--seed N]
           [--storage journal|sqlite] [--no-simulate] [--kelle-vp PATH]
       scripts/explore SPACE.yaml --backend slurm [--partition P] [--account A] [--time T] [--mem M]
           [--max-parallel K]   (screening workers and simulations as Slurm job arrays)
       scripts/explore SPACE.yaml --write-grid-study FILE   (every design of a finite space x its
           workloads as a study file for scripts/sweep: the exhaustive search)

A space file names a base scenario, fixed overrides, parameters (any scenario key: a range or
choices), derived parameters, constraints (on-chip area, DRAM fit, a quality hook), a workload set
(models x tasks, with weights), objectives and the search's settings (docs/explore.md lists every
key). The search is an Optuna study in OUT/study.journal (or OUT/study.db): run the same command
again and it resumes; --workers N local processes, or Slurm array tasks, share it.

Outputs in OUT (default results/explore/<name>): front.csv (the simulated Pareto front), trials.csv
(every screened design), simulated.csv, errors.csv (the estimate against the simulation on the
front, per workload), hypervolume.csv, front.png, front.html (interactive, offline), designs/ (each
front design as a scenario file `kelle-vp run` takes), summary.txt.
"""
import argparse
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import warnings

import yaml

from . import ROOT
from .cli import DEFAULT_KELLE_VP, Parser, entry, fail, run_argv, write_csv
from .pareto import front as pareto_front, hypervolume
from .space import (SAMPLERS, MAX_TRIALS, MAX_WORKERS, SEED_LIMIT, WORKER_SEED_STRIDE, as_value,
                    continuable, design_id, differences, identity, load_space, probe_designs, design_text)

LAUNCHER = os.path.join(ROOT, "scripts", "explore")


# ------------------------------------------------------------------------------- the two fidelities

def point_overrides(design, workload):
    """What a run sets beyond the space's overrides: the workload's, then the design's."""
    out = dict(workload["overrides"])
    out.update(design)
    return out


def run_overrides(sp, design, workload):
    """Every override of one run: the space's, the workload's, the design's (in that order)."""
    out = dict(sp.overrides)
    out.update(point_overrides(design, workload))
    return out


def study_text(v):
    return {k: design_text(x) for k, x in v.items()}


def estimate(args, sp, jobs):
    """jobs: [(key, overrides)] -> {key: estimate or {"error": ...}} with one kelle-vp estimate."""
    text = "".join(json.dumps({"id": k, "overrides": {kk: design_text(v) for kk, v in ov.items()}}) + "\n"
                   for k, ov in jobs)
    r = subprocess.run(run_argv(args.kelle_vp, sp.base, verb="estimate") + ["--designs", "-"], input=text,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        msg = [l for l in r.stderr.splitlines() if l.strip()]
        fail("kelle-vp estimate", msg[-1] if msg else f"exit status {r.returncode}")
    out = {}
    for line in r.stdout.splitlines():
        e = json.loads(line)
        out[e["id"]] = e
    missing = [k for k, _ in jobs if k not in out]
    if missing:
        fail("kelle-vp estimate", f"printed no estimate for {len(missing)} of {len(jobs)} designs (the first: {missing[0]})")
    return out


def geomean(values, weights):
    if any(v is None or v <= 0 for v in values):
        return None
    tw = sum(weights)
    return math.exp(sum(w * math.log(v) for v, w in zip(values, weights)) / tw)


def aggregate(sp, figs):
    """figs: per workload {"latency": s, "energy_per_token": J, "area": mm2, "fits": bool} -> objectives."""
    w = [x["weight"] for x in sp.workloads]
    o = {"latency": geomean([f["latency"] for f in figs], w),
         "energy_per_token": geomean([f["energy_per_token"] for f in figs], w),
         "area": figs[0]["area"]}
    return o


def est_figs(e):
    return {"latency": e["latency_s"]["total"], "energy_per_token": e["energy_per_token_J"],
            "area": e["area_mm2"]["total"], "fits": e["dram_fit"]["fits"]}


def quality_of(args, sp, design):
    """The quality hook: the command (run in the project's root folder) gets the space's overrides
    and the design's as one JSON object on stdin, KELLE_EXPLORE_OUT (the search's folder, where
    scripts/quality-loss keeps its cache) and KELLE_VP (the simulator); its last line is the loss."""
    env = dict(os.environ, KELLE_EXPLORE_OUT=args.out, KELLE_VP=args.kelle_vp)
    where = sp.lines.where("constraints", "quality_command")
    on = json.dumps({k: design_text(v) for k, v in design.items()})
    r = subprocess.run(sp.quality_cmd, shell=True, input=json.dumps({**sp.overrides, **design}),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        msg = [l.strip() for l in r.stderr.splitlines() if l.strip()]
        fail(where, f"constraints.quality_command: '{sp.quality_cmd}' failed (exit status {r.returncode}) on the "
                    f"design {on}" + (f": {msg[-1]}" if msg else ""))
    last = (r.stdout.strip().splitlines() or [""])[-1].strip()
    try:
        loss = float(last)
    except ValueError:
        loss = None
    if loss is None or not math.isfinite(loss):
        fail(where, f"constraints.quality_command: expected a finite number on its last line, got {last!r} on the "
                    f"design {on}")
    return loss


def violations(sp, objectives, fits):
    """Optuna's constraint values (<= 0: satisfied)."""
    c = []
    if sp.area_max is not None:
        c.append(objectives["area"] - sp.area_max)
    if sp.dram_fit:
        c.append(0.0 if fits else 1.0)
    if sp.quality_max is not None:
        c.append(objectives["quality_loss"] - sp.quality_max)
    return c


# --------------------------------------------------------------------------------------- the study

def locked_journal(path):
    """Optuna's journal file, read under the lock its writers take (public API only: the storage's
    lock object and its acquire/release). Optuna 3.1 (Debian 12) reads without it: a reader that
    meets a line another worker is still appending takes its first part for a broken line and,
    when the rest arrives during the same read, stops with a JSON error (seen with two local
    workers)."""
    import optuna

    class LockedJournalFile(optuna.storages.JournalFileStorage):
        def __init__(self, file_path):
            self.read_lock = optuna.storages.JournalFileOpenLock(file_path)
            super().__init__(file_path, lock_obj=self.read_lock)

        def read_logs(self, log_number_from):
            self.read_lock.acquire()
            try:
                return super().read_logs(log_number_from)
            finally:
                self.read_lock.release()

    return LockedJournalFile(path)


def open_study(args, sp, create):
    import optuna
    from optuna.exceptions import ExperimentalWarning
    warnings.filterwarnings("ignore", category=ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.storage == "sqlite":
        storage = f"sqlite:///{os.path.join(args.out, 'study.db')}"
    else:
        storage = optuna.storages.JournalStorage(locked_journal(os.path.join(args.out, "study.journal")))
    sampler = make_sampler(sp, args.worker)
    directions = ["minimize"] * len(sp.objectives)
    if create:
        study = optuna.create_study(study_name=sp.name, storage=storage, sampler=sampler, directions=directions,
                                    load_if_exists=True)
        if sp.sampler == "grid":  # the grid's next designs, as many as the trials to screen (no more)
            import itertools
            have = sum(1 for t in study.trials if t.user_attrs.get("grid"))
            for values in itertools.islice(sp.grid_values(), have, sp.trials):
                study.enqueue_trial(values, user_attrs={"grid": True})
        return study
    return optuna.load_study(study_name=sp.name, storage=storage, sampler=sampler)


def constraints_of(trial):
    return trial.user_attrs.get("constraints", [0.0])


def make_sampler(sp, worker):
    import optuna
    seed = sp.seed + 1000 * worker  # workers draw different designs
    if sp.sampler == "nsga2":
        return optuna.samplers.NSGAIISampler(population_size=sp.population, seed=seed, constraints_func=constraints_of)
    if sp.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constraints_func=constraints_of, multivariate=True)
    if sp.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if sp.sampler == "qmc":
        return optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
    # grid: every combination enqueued on the study (open_study) and asked in order; Optuna's
    # GridSampler stops the study from inside its callback, which the ask-and-tell loop cannot take.
    return optuna.samplers.RandomSampler(seed=seed)


def screen(args, sp, study, show, count=None):
    """Asks and tells trials in batches until the study has sp.trials of them (or `count` more
    trials: the enqueued ones of polish()); each batch's designs x workloads evaluated by one
    kelle-vp estimate. Returns the number told here."""
    import optuna
    told = 0
    t0 = time.time()
    while True:
        n = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                          optuna.trial.TrialState.RUNNING,
                                                          optuna.trial.TrialState.FAIL)))
        left = sp.trials - n if count is None else count - told
        if left <= 0:
            break
        batch = []
        for _ in range(min(sp.batch, left)):
            t = study.ask()
            values = {p.key: p.suggest(t) for p in sp.params}
            batch.append((t, sp.design(values)))
        jobs = [(f"{t.number}:{i}", run_overrides(sp, d, w)) for t, d in batch for i, w in enumerate(sp.workloads)]
        res = estimate(args, sp, jobs)
        for t, d in batch:
            es = [res[f"{t.number}:{i}"] for i in range(len(sp.workloads))]
            bad = [e["error"] for e in es if "error" in e]
            did = design_id(d)
            t.set_user_attr("design_id", did)
            t.set_user_attr("design", {k: design_text(v) for k, v in d.items()})
            if bad:
                t.set_user_attr("error", bad[0])
                study.tell(t, state=optuna.trial.TrialState.FAIL)
                continue
            figs = [est_figs(e) for e in es]
            obj = aggregate(sp, figs)
            if sp.quality_cmd:
                obj["quality_loss"] = quality_of(args, sp, d)
            fits = all(f["fits"] for f in figs)
            c = violations(sp, obj, fits)
            t.set_user_attr("constraints", c or [0.0])
            t.set_user_attr("feasible", all(x <= 0 for x in c))
            t.set_user_attr("estimate", {"objectives": obj, "workloads": figs})
            study.tell(t, [obj[o] for o in sp.objectives])
            told += 1
        if count is not None:
            told += sum(1 for t, _ in batch if t.user_attrs.get("error"))  # failed ones count too
        if show:
            progress(sp, study, t0, told)
    return told


def short_keys(keys):
    """Each key's shortest dotted suffix that no other key ends with: `rows`, but
    `weight_sram.capacity_MiB` beside `kv_edram.capacity_MiB`."""
    out = {}
    for k in keys:
        parts = k.split(".")
        n = 1
        while n < len(parts) and sum(1 for o in keys if o == ".".join(parts[-n:]) or o.endswith("." + ".".join(parts[-n:]))) > 1:
            n += 1
        out[k] = ".".join(parts[-n:])
    return out

def neighbours(sp, design):
    """The designs one step from `design` (its recorded texts) in one parameter (Param.neighbours):
    the parameters' values of each."""
    values = {p.key: as_value(p, design.get(p.key)) for p in sp.params}
    return [{**values, p.key: v} for p in sp.params for v in p.neighbours(values[p.key])]


def distinct(rows):
    """One design per estimated objective vector (to 9 digits), the first of each: designs the
    estimate cannot tell apart (they differ in a parameter that does not change them, such as the
    refresh policy of an eDRAM that holds no KV) are polished and simulated once."""
    seen, out = set(), []
    for r in rows:
        k = tuple(f"{r['est'][o]:.9g}" for o in OBJ)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def polish(args, sp, study, rounds=8):
    """The estimated front, polished: every design one step from a front design in one parameter
    (neighbours()) that the study has not evaluated is estimated, until the front has no such
    neighbour left (at most `rounds` rounds). Milliseconds per design: a sampler that converges
    near the front leaves its neighbourhood to this. Its trials carry the user attribute `polish`
    (counted from the study, a resumed one's earlier runs too)."""
    for _ in range(rounds):
        rows = trial_rows(sp, study)
        seen = {r["id"] for r in rows} | {t.user_attrs.get("design_id") for t in study.trials}
        todo = {}
        for r in distinct(pareto([r for r in rows if r["feasible"]], "est")):
            for values in neighbours(sp, r["design"]):
                did = design_id(sp.design(values))
                if did not in seen and did not in todo:
                    todo[did] = values
        if not todo:
            break
        print(f"  polishing the estimated front: {len(todo)} neighbouring designs", flush=True)
        for values in todo.values():
            study.enqueue_trial(values, user_attrs={"polish": True})  # counted as the front's neighbours
        screen(args, sp, study, show=False, count=len(todo))


def progress(sp, study, t0, told):
    done = len(study.trials)
    el = time.time() - t0
    rate = told / el if el > 0 else 0
    eta = max(0, sp.trials - done) / rate if rate > 0 else 0
    rows = trial_rows(sp, study)
    front = pareto([r for r in rows if r["feasible"]], "est")
    print(f"  [{min(done, sp.trials)}/{sp.trials}] trials, {sum(r['feasible'] for r in rows)} feasible, "
          f"estimated front {len(front)} designs, {rate:.0f} trials/s, elapsed {el:.0f} s, ETA {eta:.0f} s",
          flush=True)


def trial_rows(sp, study):
    import optuna
    rows = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        est = t.user_attrs.get("estimate")
        if not est:
            continue
        rows.append({"trial": t.number, "id": t.user_attrs["design_id"], "design": t.user_attrs["design"],
                     "feasible": t.user_attrs.get("feasible", True), "est": est["objectives"],
                     "est_workloads": est["workloads"]})
    return rows


# ------------------------------------------------------------------------------------- the front

def pareto(rows, which, objectives=None, scale=1.0):
    """The rows (one per design id) no other row dominates by row[which][objective]; with scale > 1,
    the rows within (scale - 1) of the front (pareto.front)."""
    objs = objectives or OBJ
    uniq = {}
    for r in rows:
        uniq.setdefault(r["id"], r)
    return pareto_front(list(uniq.values()), key=lambda r: [r[which][o] for o in objs], scale=scale)


OBJ = []  # the space's objectives (set in main)


def hypervolume_history(sp, rows):
    """Hypervolume of the estimated feasible front after each trial (pareto.hypervolume),
    normalised objectives; reference point 1.1 x the worst of each objective."""
    feas = sorted([r for r in rows if r["feasible"]], key=lambda r: r["trial"])
    if not feas:
        return []
    lo = {o: min(r["est"][o] for r in feas) for o in OBJ}
    hi = {o: max(r["est"][o] for r in feas) for o in OBJ}
    norm = lambda r: [(r["est"][o] - lo[o]) / ((hi[o] - lo[o]) or 1.0) for o in OBJ]  # noqa: E731
    ref = [1.1] * len(OBJ)
    out, now, hv = [], [], 0.0
    for r in feas:
        p = norm(r)
        if not any(all(q[i] <= p[i] for i in range(len(p))) for q in now):  # the front moves
            now = [q for q in now if not all(p[i] <= q[i] for i in range(len(p)))] + [p]
            hv = hypervolume(now, ref)
        out.append((r["trial"], hv))
    return out


def simulate(args, sp, designs, label):
    """Simulates designs (id -> overrides) x the workloads through scripts/sweep (points already
    simulated are kept); returns {(id, workload index): results.json}."""
    points, index = [], {}
    for did, d in designs.items():
        for i, w in enumerate(sp.workloads):
            p = study_text(point_overrides(d, w))
            points.append(p)
            index[(did, i)] = p
    if not points:
        return {}
    study = {"name": f"{sp.name}-sim", "base": sp.base, "overrides": study_text(sp.overrides), "points": points}
    path = os.path.join(args.out, f"simulate-{label}.yaml")
    with open(path, "w") as f:
        f.write(f"# The simulations of scripts/explore {sp.path} ({label}): generated.\n")
        yaml.safe_dump(study, f, sort_keys=False)
    cmd = [os.path.join(ROOT, "scripts", "sweep"), path, "--out", os.path.join(args.out, "sim"),
           "--kelle-vp", args.kelle_vp]
    if args.backend == "slurm":
        cmd += ["--backend", "slurm", "--wait"] + slurm_options(args)
    else:
        cmd += ["--workers", str(args.workers)]
    print(f"explore {sp.name}: simulating {len(designs)} design(s) x {len(sp.workloads)} workload(s) ({label})",
          flush=True)
    rc = subprocess.call(cmd)
    from .sweep import point_id
    out = {}
    for key, p in index.items():
        rp = os.path.join(args.out, "sim", point_id(p), "results.json")
        if os.path.isfile(rp):
            with open(rp) as f:
                out[key] = json.load(f)
    missing = [k for k in index if k not in out]
    if missing:
        fail("scripts/sweep", f"{len(missing)} simulation(s) failed (exit {rc}); their logs are in {args.out}/sim/")
    return out


def sim_figs(r):
    gen = r["throughput"]["generated_tokens"]
    return {"latency": r["latency_s"]["total"], "energy_per_token": r["energy_J"]["total"] / gen if gen else None,
            "fits": not r.get("llm", {}).get("dram_overflow_bytes")}


def slurm_options(args):
    out = []
    for o in ("partition", "account", "time", "mem", "max_parallel"):
        v = getattr(args, o)
        if v is not None:
            out += [f"--{o.replace('_', '-')}", str(v)]
    return out


def in_turn(rows):
    """The rows taken in turn from each objective's best end (the best by the first objective, then
    by the second, ..., then the second best by the first, ...): when search.max_simulated caps
    the simulations, the front's every end is simulated, not only the first objective's."""
    orders = [sorted(rows, key=lambda r: (r["est"][o], r["trial"])) for o in OBJ]
    out, seen = [], set()
    for i in range(len(rows)):
        for order in orders:
            if order[i]["id"] not in seen:
                seen.add(order[i]["id"])
                out.append(order[i])
    return out


def refine(args, sp, rows, refs):
    """The second fidelity: simulate the designs within the margin of the estimated front, then
    again within the estimate's largest error measured so far, until nothing new is within it or the
    rounds are spent; the final front is the simulated one. Returns (simulated rows, front, margins)."""
    feas = [r for r in rows if r["feasible"]]
    simulated, margins = {}, []
    margin = sp.margin
    for rnd in range(1, sp.rounds + 1):
        cand = pareto(feas, "est", scale=1.0 + margin)
        on_front = {r["id"] for r in pareto(feas, "est")}
        cand = distinct(in_turn([r for r in cand if r["id"] in on_front]) +
                        in_turn([r for r in cand if r["id"] not in on_front]))
        new = [r for r in cand if r["id"] not in simulated][:max(0, sp.max_simulated - len(simulated))]
        margins.append((rnd, margin, len(cand), len(new)))
        if not new:
            break
        res = simulate(args, sp, {r["id"]: r["design"] for r in new}, f"round{rnd}")
        for r in new:
            figs = [sim_figs(res[(r["id"], i)]) for i in range(len(sp.workloads))]
            r = dict(r)
            r["sim"] = aggregate(sp, [{**f, "area": r["est"]["area"]} for f in figs])
            if sp.quality_cmd:
                r["sim"]["quality_loss"] = r["est"]["quality_loss"]
            r["sim_workloads"] = figs
            r["results"] = [res[(r["id"], i)] for i in range(len(sp.workloads))]
            r["sim_fits"] = all(f["fits"] for f in figs)
            simulated[r["id"]] = r
        # The estimate's largest relative error so far on any objective: the next round's margin.
        err = max(abs(r["est"][o] / r["sim"][o] - 1) for r in simulated.values() for o in OBJ if r["sim"][o])
        margin = max(sp.margin, 2 * err)
    front = pareto([r for r in simulated.values() if r["sim_fits"] or not sp.dram_fit], "sim")
    front.sort(key=lambda r: r["sim"][OBJ[0]])
    return list(simulated.values()), front, margins


# -------------------------------------------------------------------------------------- outputs

def write_design_file(args, sp, r):
    os.makedirs(os.path.join(args.out, "designs"), exist_ok=True)
    path = os.path.join(args.out, "designs", f"{r['id']}.yaml")
    tree = {}
    for k, v in list(sp.overrides.items()) + list(r["design"].items()):
        node = tree
        parts = k.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = yaml.safe_load(design_text(v)) if isinstance(v, str) else v
    objs = ", ".join(f"{o} {r['sim'][o]:.4g}" for o in OBJ)
    with open(path, "w") as f:
        f.write(f"# Design {r['id']} of the front of scripts/explore {os.path.relpath(sp.path, ROOT)}:\n"
                f"# simulated {objs} over the space's workloads. Run one of them:\n")
        w = sp.workloads[0]["overrides"]
        f.write("#   build/kelle-vp run " + os.path.relpath(path, ROOT) + " " +
                " ".join(f"-p {k}={design_text(v)}" for k, v in w.items()) + "\n")
        f.write(f"include: {os.path.relpath(sp.base, os.path.dirname(path))}\n")
        yaml.safe_dump(tree, f, sort_keys=False)
    return path


UNITS = {"latency": "s", "energy_per_token": "J/token", "area": "mm2", "quality_loss": ""}


def hover(sp, r, which):
    lines = [f"<b>{r.get('label') or r['id']}</b>"]
    for o in OBJ:
        lines.append(f"{o}: {r[which][o]:.4g} {UNITS[o]}" + (f" (estimate {r['est'][o]:.4g})" if which == "sim" else ""))
    for k, v in r.get("design", {}).items():
        lines.append(f"{k} = {v}")
    return "<br>".join(lines)


def plots(args, sp, rows, simulated, front, refs, hv):
    x, y = OBJ[0], OBJ[1] if len(OBJ) > 1 else OBJ[0]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 5))
    feas = [r for r in rows if r["feasible"]]
    ax.scatter([r["est"][x] for r in feas], [r["est"][y] for r in feas], s=8, c="#bbbbbb", label="screened (estimate)")
    ax.scatter([r["sim"][x] for r in simulated], [r["sim"][y] for r in simulated], s=18, c="#4477aa",
               label="simulated near the front")
    ax.plot([r["sim"][x] for r in front], [r["sim"][y] for r in front], "o-", c="#cc3311", label="Pareto front (simulated)")
    for r, m in zip(refs, ["*", "s", "^", "D"]):
        ax.scatter([r["sim"][x]], [r["sim"][y]], marker=m, s=120, c="black", label=r["label"])
    ax.set_xlabel(f"{x} ({UNITS[x]})")
    ax.set_ylabel(f"{y} ({UNITS[y]})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(f"{sp.name}: {len(rows)} designs screened, {len(simulated)} simulated", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "front.png"), dpi=120)
    plt.close(fig)

    import plotly.graph_objects as go
    f = go.Figure()
    f.add_trace(go.Scatter(x=[r["est"][x] for r in feas], y=[r["est"][y] for r in feas], mode="markers",
                           name="screened (estimate)", marker=dict(size=5, color="#bbbbbb"),
                           hovertext=[hover(sp, r, "est") for r in feas], hoverinfo="text"))
    f.add_trace(go.Scatter(x=[r["sim"][x] for r in simulated], y=[r["sim"][y] for r in simulated], mode="markers",
                           name="simulated near the front", marker=dict(size=8, color="#4477aa"),
                           hovertext=[hover(sp, r, "sim") for r in simulated], hoverinfo="text"))
    f.add_trace(go.Scatter(x=[r["sim"][x] for r in front], y=[r["sim"][y] for r in front], mode="lines+markers",
                           name="Pareto front (simulated)", marker=dict(size=11, color="#cc3311"),
                           hovertext=[hover(sp, r, "sim") for r in front], hoverinfo="text"))
    for r, m in zip(refs, ["star", "square", "triangle-up", "diamond"]):
        f.add_trace(go.Scatter(x=[r["sim"][x]], y=[r["sim"][y]], mode="markers+text", name=r["label"],
                               text=[r["label"]], textposition="top center",
                               marker=dict(size=16, symbol=m, color="black"),
                               hovertext=[hover(sp, r, "sim")], hoverinfo="text"))
    f.update_layout(title=f"{sp.name}: the Pareto front ({len(front)} designs, simulated)",
                    xaxis=dict(title=f"{x} ({UNITS[x]})", type="log"), yaxis=dict(title=f"{y} ({UNITS[y]})", type="log"),
                    width=1000, height=650)
    h = go.Figure(go.Scatter(x=[t for t, _ in hv], y=[v for _, v in hv], mode="lines", name="hypervolume"))
    h.update_layout(title="Hypervolume of the estimated front after each trial (normalised objectives)",
                    xaxis_title="trial", yaxis_title="hypervolume", width=1000, height=400)
    html = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + sp.name + ": design-space search</title></head>"
            "<body style='font-family:sans-serif'><h2>" + sp.name + "</h2><p>" + (sp.description or "") + "</p>" +
            f.to_html(include_plotlyjs=True, full_html=False) +
            h.to_html(include_plotlyjs=False, full_html=False) + "</body></html>")
    tmp = os.path.join(args.out, f".front.html.tmp{os.getpid()}")
    with open(tmp, "w") as fh:
        fh.write(html)
    os.replace(tmp, os.path.join(args.out, "front.html"))


def component_groups(by):
    """Energy by component grouped by memory or block (the estimate's '<block>.compute' is the
    simulation's parts of that block together)."""
    g = {}
    for k, v in by.items():
        if k == "total":
            continue
        g[k.split(".")[0]] = g.get(k.split(".")[0], 0) + v
    return g


def reference_rows(args, sp):
    refs = []
    jobs = [(f"ref{j}:{i}", run_overrides(sp, r["overrides"], w)) for j, r in enumerate(sp.references)
            for i, w in enumerate(sp.workloads)]
    est = estimate(args, sp, jobs)
    for j, r in enumerate(sp.references):
        es = [est[f"ref{j}:{i}"] for i in range(len(sp.workloads))]
        if any("error" in e for e in es):
            fail(sp.lines.where("references"), f"references[{j}] ({r['label']}): {next(e['error'] for e in es if 'error' in e)}")
        est_o = aggregate(sp, [est_figs(e) for e in es])
        if sp.quality_cmd:  # the same quality run as a design's: the reference's quality keys
            est_o["quality_loss"] = quality_of(args, sp, r["overrides"])
        refs.append({"id": "ref" + design_id(r["overrides"])[1:], "label": r["label"], "design": r["overrides"],
                     "est": est_o, "est_workloads": [est_figs(e) for e in es]})
    return refs


def local_workers(args, sp, study):
    """Screening on --workers local processes sharing the study: this one and workers 1..N-1 (each
    the same command with --worker i). A worker's error is this run's (its line, relayed); an
    error here stops the workers."""
    procs = []
    try:
        for i in range(1, args.workers):
            err = open(os.path.join(args.out, f".worker{i}.err"), "w+")
            procs.append((i, err, subprocess.Popen(
                [sys.executable, LAUNCHER, args.space, "--out", args.out, "--kelle-vp", args.kelle_vp,
                 "--storage", args.storage, "--worker", str(i), "--workers", str(args.workers),
                 "--trials", str(sp.trials), "--sampler", sp.sampler, "--seed", str(sp.seed),
                 "--worker-run", "-o", os.devnull, "-p", f"explore_worker={i}"],
                stdout=subprocess.DEVNULL, stderr=err)))
        screen(args, sp, study, show=True)
        for i, err, p in procs:
            if p.wait() != 0:
                err.seek(0)
                msg = [l.strip() for l in err.read().splitlines() if l.strip()]
                last = msg[-1] if msg else f"exit status {p.returncode}"
                fail(f"screening worker {i}", last.replace("explore: error: ", "", 1))
    finally:
        for i, err, p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait()
            err.close()
            os.remove(err.name)


def refused_trials(study):
    """The trials whose design the platform refused (kelle-vp estimate's error), in order."""
    import optuna
    return [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,))
            if t.user_attrs.get("error")]


def no_feasible_design(sp, study, rows, refused):
    """(where, message) saying why no screened design is feasible: the first design's reason."""
    first = min([("row", r["trial"], r) for r in rows] + [("refused", t.number, t) for t in refused],
                key=lambda x: x[1], default=None)
    n = len(rows) + len(refused)
    if first is None:
        return sp.lines.where("parameters"), "parameters: no design was screened"
    kind, _, x = first
    if kind == "refused":
        return (sp.lines.where("parameters"), f"no feasible design among the {n} screened: the platform refuses the "
                f"first, {json.dumps(x.user_attrs.get('design'))}: {x.user_attrs['error']}")
    design = json.dumps(x["design"])
    if sp.area_max is not None and x["est"]["area"] > sp.area_max:
        return (sp.lines.where("constraints", "area_mm2_max"), f"constraints.area_mm2_max: no feasible design among "
                f"the {n} screened: the first, {design}, has {x['est']['area']:.4g} mm2 of area, more than "
                f"{sp.area_max:g}")
    if sp.dram_fit and not all(f["fits"] for f in x["est_workloads"]):
        w = next(sp.workloads[i]["label"] for i, f in enumerate(x["est_workloads"]) if not f["fits"])
        return (sp.lines.where("constraints", "dram_fit"), f"constraints.dram_fit: no feasible design among the {n} "
                f"screened: the first, {design}, does not fit the DRAM in workload {w} (weights and the KV not on "
                "chip; dram_fit: false reports the fit without requiring it)")
    return (sp.lines.where("constraints", "quality_loss_max"), f"constraints.quality_loss_max: no feasible design "
            f"among the {n} screened: the first, {design}, loses {x['est'].get('quality_loss')}, more than "
            f"{sp.quality_max}")


@entry("explore")
def main(argv):
    """The command: 0 when the search ran, 2 with one line on standard error when the input is bad."""
    return run(argv)


def options(argv):
    ap = Parser(prog="explore", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("space")
    ap.add_argument("--out", help="results folder (default results/explore/<name>)")
    ap.add_argument("--trials", type=int, help="screened trials in all (default: search.trials)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="screening processes sharing the study, and simulations at once (default: cores)")
    ap.add_argument("--sampler", choices=SAMPLERS, help="default: search.sampler")
    ap.add_argument("--seed", type=int, help="default: search.seed")
    ap.add_argument("--storage", choices=["journal", "sqlite"], default="journal",
                    help="the study's storage: a journal file (default; safe for workers on a shared file system) or SQLite")
    ap.add_argument("--no-simulate", action="store_true", help="screen only (no simulation, no front files)")
    ap.add_argument("--kelle-vp", default=DEFAULT_KELLE_VP, metavar="PATH", help="the simulator (default build/kelle-vp)")
    ap.add_argument("--write-grid-study", metavar="FILE", help="write every design x workload as a study file and stop")
    ap.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--worker-run", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    sl = ap.add_argument_group("Slurm backend (--backend slurm)")
    ap.add_argument("--backend", choices=["local", "slurm"], default="local")
    for o in ("partition", "account", "time", "mem"):
        sl.add_argument(f"--{o}")
    sl.add_argument("--max-parallel", type=int)
    args = ap.parse_args(argv)
    if args.trials is not None and not 1 <= args.trials <= MAX_TRIALS:
        fail("--trials", f"expected a whole number from 1 to {MAX_TRIALS:,}, got {args.trials}")
    if not 1 <= args.workers <= MAX_WORKERS:
        fail("--workers", f"expected a whole number from 1 to {MAX_WORKERS}, got {args.workers}")
    if args.seed is not None and not 0 <= args.seed < SEED_LIMIT:
        fail("--seed", f"expected a whole number from 0 to {SEED_LIMIT - 1} (NumPy's seeds), got {args.seed}")
    if args.max_parallel is not None and args.max_parallel < 1:
        fail("--max-parallel", f"expected a whole number >= 1, got {args.max_parallel}")
    return args


def run(argv):
    global OBJ
    # Optuna's warnings are not the user's to read: the space's checks say what matters (a step
    # that does not divide its range is refused before Optuna would adjust it and warn).
    warnings.filterwarnings("ignore", category=UserWarning, module=r"optuna\.")
    args = options(argv)
    sp = load_space(args.space)
    OBJ = sp.objectives
    if args.trials is not None:
        sp.trials = args.trials
    if args.sampler:
        sp.sampler = args.sampler
        if sp.sampler == "grid":
            sp.check_grid("--sampler grid")
    if args.seed is not None:
        sp.seed = args.seed
    workers = max(args.workers, args.worker + 1)
    if sp.seed + WORKER_SEED_STRIDE * (workers - 1) >= SEED_LIMIT:
        fail(sp.lines.where("search", "seed") if args.seed is None else "--seed",
             f"search.seed: {sp.seed} + {WORKER_SEED_STRIDE} x {workers - 1} (worker i draws with seed + "
             f"{WORKER_SEED_STRIDE} i) exceeds NumPy's seeds (at most {SEED_LIMIT - 1}); give a seed of at most "
             f"{SEED_LIMIT - 1 - WORKER_SEED_STRIDE * (workers - 1)}")
    args.out = os.path.abspath(args.out or os.path.join(ROOT, "results", "explore", sp.name))
    args.kelle_vp = os.path.abspath(args.kelle_vp)
    if sp.sampler == "grid":  # the grid has so many designs: more trials would repeat them
        sp.trials = min(sp.trials, sp.grid_size())

    if args.write_grid_study:
        return write_grid_study(args, sp)

    if not (os.path.isfile(args.kelle_vp) and os.access(args.kelle_vp, os.X_OK)):
        fail("--kelle-vp", f"{args.kelle_vp} is not an executable (build first: ./scripts/build)")

    if args.worker_run is not None:  # a Slurm array task of the sweep's backend: one screening worker
        rest = args.worker_run
        folder = rest[rest.index("-o") + 1]
        worker = next(int(rest[i + 1].split("=", 1)[1]) for i in range(len(rest) - 1)
                      if rest[i] == "-p" and rest[i + 1].startswith("explore_worker="))
        args.worker = worker
        study = open_study(args, sp, create=False)
        n = screen(args, sp, study, show=True)
        if folder != os.devnull:  # the sweep's point folder: the point is done
            with open(os.path.join(folder, "results.json"), "w") as f:
                json.dump({"explore_worker": worker, "trials_told": n}, f)
        return 0

    # Before anything is written or searched: the base, each parameter's ends, the derived
    # expressions, the workloads and the references through the platform; the quality command.
    check_space(args, sp)
    # The results folder holds this search's results only (search.json records which).
    guard_folder(args, sp)
    t0 = time.time()
    study = open_study(args, sp, create=True)
    have = len(study.trials)
    print(f"explore {sp.name}: {len(sp.params)} parameters, {len(sp.workloads)} workloads, objectives "
          f"{', '.join(sp.objectives)}; sampler {sp.sampler}; {have} of {sp.trials} trials done -> {args.out}", flush=True)
    if args.backend == "slurm":
        slurm_screen(args, sp)
    elif args.workers > 1:
        local_workers(args, sp, study)
    else:
        screen(args, sp, study, show=True)
    polish(args, sp, study)
    t_screen = time.time() - t0
    # The study's polish trials, this run's and a resumed study's earlier runs' alike.
    polished = sum(1 for t in study.trials if t.user_attrs.get("polish"))
    rows = trial_rows(sp, study)
    hv = hypervolume_history(sp, rows)
    write_csv(os.path.join(args.out, "hypervolume.csv"), [{"trial": t, "hypervolume": v} for t, v in hv])
    trows = []
    for r in rows:
        row = {"trial": r["trial"], "design": r["id"], "feasible": r["feasible"]}
        row.update(r["design"])
        row.update({f"est.{o}": r["est"][o] for o in OBJ})
        for i, w in enumerate(sp.workloads):
            row[f"est.{w['label']}.latency_s"] = r["est_workloads"][i]["latency"]
            row[f"est.{w['label']}.energy_per_token_J"] = r["est_workloads"][i]["energy_per_token"]
        trows.append(row)
    write_csv(os.path.join(args.out, "trials.csv"), trows)
    feas = [r for r in rows if r["feasible"]]
    refused = refused_trials(study)
    print(f"explore {sp.name}: screened {len(rows)} trials ({len({r['id'] for r in rows})} distinct designs, "
          f"{len(feas)} feasible; {polished} of them the front's neighbours) in {t_screen:.0f} s; estimated front "
          f"{len(pareto(feas, 'est'))} designs", flush=True)
    if refused:
        print(f"explore {sp.name}: {len(refused)} designs refused by the platform (the first, "
              f"{json.dumps(refused[0].user_attrs.get('design'))}: {refused[0].user_attrs['error']})", flush=True)
    if not feas:
        fail(*no_feasible_design(sp, study, rows, refused))
    if args.no_simulate:
        return 0

    refs = reference_rows(args, sp)
    simulated, front, margins = refine(args, sp, rows, refs)
    res = simulate(args, sp, {r["id"]: r["design"] for r in refs}, "references")
    for r in refs:
        figs = [sim_figs(res[(r["id"], i)]) for i in range(len(sp.workloads))]
        r["sim"] = aggregate(sp, [{**f, "area": r["est"]["area"]} for f in figs])
        if sp.quality_cmd:
            r["sim"]["quality_loss"] = r["est"]["quality_loss"]
        r["sim_workloads"] = figs
        r["results"] = [res[(r["id"], i)] for i in range(len(sp.workloads))]
    # Outputs.
    srows, erows = [], []
    for r in simulated + refs:
        row = {"design": r["id"], "label": r.get("label", ""), "on_front": r in front}
        row.update(r["design"])
        for o in OBJ:
            row[f"sim.{o}"] = r["sim"][o]
            row[f"est.{o}"] = r["est"][o]
            row[f"error.{o}"] = r["est"][o] / r["sim"][o] - 1 if r["sim"][o] else None
        srows.append(row)
        if r in front or r in refs:
            for i, w in enumerate(sp.workloads):
                e, s = r["est_workloads"][i], r["sim_workloads"][i]
                er = {"design": r["id"], "label": r.get("label", ""), "workload": w["label"],
                      "est.latency_s": e["latency"], "sim.latency_s": s["latency"],
                      "error.latency": e["latency"] / s["latency"] - 1,
                      "est.energy_per_token_J": e["energy_per_token"], "sim.energy_per_token_J": s["energy_per_token"],
                      "error.energy": e["energy_per_token"] / s["energy_per_token"] - 1}
                erows.append(er)
    write_csv(os.path.join(args.out, "simulated.csv"), srows)
    write_csv(os.path.join(args.out, "front.csv"), [s for s in srows if s["on_front"]])
    write_csv(os.path.join(args.out, "errors.csv"), erows)
    files = [write_design_file(args, sp, r) for r in front]
    plots(args, sp, rows, simulated, front, refs, hv)
    front_err = [e for e in erows if e["label"] == ""]
    lines = [f"explore {sp.name}: {len(rows)} trials screened, {len(simulated)} designs simulated "
             f"(margins by round: " + ", ".join(f"{m:.0%} -> {n} new" for _, m, _, n in margins) + ")",
             f"Pareto front (simulated): {len(front)} designs"]
    # The cap's cost, said: estimated-front designs that search.max_simulated left unsimulated.
    est_front = {r["id"] for r in pareto([r for r in rows if r["feasible"]], "est")}
    left = est_front - {r["id"] for r in simulated}
    if left:
        lines.insert(1, f"note: search.max_simulated {sp.max_simulated} left {len(left)} of the estimated front's "
                        f"{len(est_front)} designs unsimulated; the simulated front may miss them (raise "
                        f"search.max_simulated to simulate them)")
    for r in front:
        names = short_keys(list(r["design"]))
        lines.append("  " + r["id"] + "  " + "  ".join(f"{o} {r['sim'][o]:.4g}" for o in OBJ) + "  " +
                     " ".join(f"{names[k]}={v}" for k, v in r["design"].items()))
    for r in refs:
        lines.append(f"  {r['label']:<24} " + "  ".join(f"{o} {r['sim'][o]:.4g}" for o in OBJ))
    if front_err:
        lines.append(f"estimate against simulation on the front ({len(front_err)} runs): latency error "
                     f"max {max(abs(e['error.latency']) for e in front_err):.1%}, energy per token error "
                     f"max {max(abs(e['error.energy']) for e in front_err):.1%}")
    lines.append(f"wall time {time.time() - t0:.0f} s; outputs in {args.out} (front.csv, front.html, front.png, "
                 f"designs/ with {len(files)} scenario files)")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(text)
    print(text, end="")
    return 0


def platform_check(args, sp, overrides):
    """`kelle-vp check` of the base with the space's overrides and these: (exit status, last line)."""
    cmd = run_argv(args.kelle_vp, sp.base, verb="check",
                   overrides=[(k, design_text(v)) for k, v in list(sp.overrides.items()) + list(overrides.items())])
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return r.returncode, (r.stderr.strip().splitlines() or [""])[-1].replace("kelle-vp: error: ", "")


def file_error(msg):
    """A refusal that is the space file's (a key the platform does not know, a value of the wrong
    kind, a name that is not a system or model), not a combination the search should find
    infeasible (a design too large for the DRAM)."""
    return "does not fit" not in msg and ("unknown" in msg or "expected" in msg or "not found" in msg)


def check_space(args, sp):
    """Through the platform, before anything is written or searched (also with --no-simulate):
    the base is an LLM scenario; each parameter's ends (each choice, both ends of a range), the
    derived expressions on the probe designs, each workload and each reference are accepted by
    `kelle-vp check`; the quality command is there."""
    import concurrent.futures as cf
    w0 = sp.workloads[0]["overrides"]
    r = subprocess.run(run_argv(args.kelle_vp, sp.base, verb="estimate", overrides=[
        (k, design_text(v)) for k, v in list(sp.overrides.items()) + list(w0.items())]) + ["--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base_msg = None
    if r.returncode != 0:
        base_msg = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1].replace("kelle-vp: error: ", "")
        if "type: llm" in base_msg:
            fail(sp.lines.where("base"), f"base: {sp.base_text} is not an LLM scenario: {base_msg}")
    # (where, what, overrides, strict, names): a strict probe's every refusal is the file's error
    # (but a DRAM that the run does not fit); another's only an unknown key or a value of the wrong
    # kind (file_error), for a derived key's probe one that names that key.
    probes = []
    for p in sp.params:
        for v in (p.choices if p.kind == "choice" else [p.low, p.high]):
            probes.append((sp.lines.where("parameters", p.key), f"parameters.{p.key} = {design_text(v)}",
                           {**w0, p.key: v}, False, None))
    if sp.derived:
        for values in probe_designs(sp):
            d = sp.design(values)  # a name in arithmetic, a division by zero: the expression's error here
            for k in sp.derived:
                probes.append((sp.lines.where("derived", k), f"derived.{k} = {design_text(d[k])} (with " +
                               ", ".join(f"{p.key}={design_text(values[p.key])}" for p in sp.params
                                         if p.key in sp.derived[k].refs) + ")", {**w0, **d}, False, k))
    for i, w in enumerate(sp.workloads):
        probes.append((sp.lines.where("workloads", i), f"workloads[{i}]", w["overrides"], True, None))
    for j, ref in enumerate(sp.references):
        for i, w in enumerate(sp.workloads):
            probes.append((ref["where"], f"references[{j}] ({ref['label']}) on workloads[{i}]",
                           {**w["overrides"], **ref["overrides"]}, True, None))
    seen, todo = set(), []
    for pr in probes:  # each distinct check once
        key = json.dumps({k: design_text(v) for k, v in pr[2].items()}, sort_keys=True) + str(pr[3:])
        if key not in seen:
            seen.add(key)
            todo.append(pr)

    def check(pr):
        return pr, platform_check(args, sp, pr[2])

    with cf.ThreadPoolExecutor(max_workers=max(1, min(args.workers, 8))) as ex:
        for (where, what, _, strict, names), (rc, msg) in ex.map(check, todo):
            if rc == 0:
                continue
            if "does not fit" not in msg if strict else file_error(msg) and (names is None or names in msg):
                fail(where, f"{what}: {msg}")
    if base_msg is not None:  # no probe names the cause: the base with the overrides is refused
        fail(sp.lines.where("base"), f"base: {sp.base_text} with the space's overrides and its first "
                                     f"workload is refused by the estimate: {base_msg}")
    if sp.quality_cmd:
        check_command(sp)


def check_command(sp):
    """The quality command's program is there (run from the project's root folder)."""
    where = sp.lines.where("constraints", "quality_command")
    try:
        words = shlex.split(sp.quality_cmd)
    except ValueError as e:
        fail(where, f"constraints.quality_command: expected a command line ({e})")
    words = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)]  # VAR=value before it
    if not words:
        fail(where, "constraints.quality_command: expected a command line, got only variable settings")
    prog = words[0]
    found = (os.access(os.path.join(ROOT, prog), os.X_OK) and os.path.isfile(os.path.join(ROOT, prog))) \
        if "/" in prog else shutil.which(prog) is not None or subprocess.run(
            ["sh", "-c", f"command -v {shlex.quote(prog)}"], stdout=subprocess.DEVNULL, cwd=ROOT).returncode == 0
    if not found:
        fail(where, f"constraints.quality_command: '{prog}' is not a program (looked " +
             (f"at {os.path.join(ROOT, prog)}, relative to the project's root folder where the command runs)"
              if "/" in prog else "on PATH)"))


MANIFEST = "search.json"


def shown(path):
    """A path as a user reads it in an error: relative to the working folder when it is below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def short(v):
    t = json.dumps(v)
    return t if len(t) <= 60 else t[:57] + "..."


def guard_folder(args, sp):
    """The results folder holds one search: search.json records its space and settings. A folder
    with another search's record, or this one's with a changed space or settings, is refused with
    what differs; a folder with files but no record (not a search's, or made before records) is
    refused; a resumed search may change only the trials, the refinement's settings, the
    references and the description (each said)."""
    out = args.out
    if os.path.exists(out) and not os.path.isdir(out):
        fail("--out", f"{shown(out)} is a file, expected a results folder")
    rec = {"format": 1, "space": sp.path, "storage": args.storage, "identity": identity(sp),
           "continuable": continuable(sp)}
    path = os.path.join(out, MANIFEST)
    if os.path.isfile(path):
        try:
            with open(path) as f:
                old = json.load(f)
        except (OSError, ValueError) as e:
            fail(path, f"cannot read the results folder's record ({e}); give another --out")
        if not isinstance(old, dict) or old.get("format") != 1 or not isinstance(old.get("identity"), dict):
            fail(path, "not a record of scripts/explore; give another --out")
        diff = differences({"storage": old.get("storage"), **old["identity"]},
                           {"storage": args.storage, **rec["identity"]})
        if diff:
            listed = "; ".join(f"{p}: {short(o)} there, {short(n)} here" for p, o, n in diff[:3])
            more = f"; and {len(diff) - 3} more" if len(diff) > 3 else ""
            fail("--out", f"{shown(out)} holds the search '{old['identity'].get('name')}' of "
                          f"{shown(old.get('space', '?'))} with another space or settings ({listed}{more}); a results "
                          "folder resumes only the same search: give another --out, or remove the folder to start again")
        for p, o, n in differences(old.get("continuable", {}), rec["continuable"]):
            print(f"explore {sp.name}: resuming with {p} {short(n)} (was {short(o)})", flush=True)
    elif os.path.isdir(out) and os.listdir(out):
        fail("--out", f"{shown(out)} holds files but no {MANIFEST}: not this search's results (another folder, or a "
                      "search made before results folders were recorded); give another --out or empty the folder")
    os.makedirs(out, exist_ok=True)
    tmp = path + f".tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=1)
    os.replace(tmp, path)


GRID_HEADER = "# Every design of "


def write_grid_study(args, sp):
    """--write-grid-study FILE: every design x workload as a study file for scripts/sweep. FILE is
    written only when new or made by this option before (its first line says so)."""
    path = os.path.abspath(args.write_grid_study)
    n = sp.check_grid("--write-grid-study", per_design=len(sp.workloads))
    if os.path.isdir(path):
        fail("--write-grid-study", f"{path} is a folder, expected a file name")
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            first = f.readline()
        if not first.startswith(GRID_HEADER) or os.path.realpath(path) in (os.path.realpath(sp.path),
                                                                          os.path.realpath(sp.base)):
            fail("--write-grid-study", f"{path} exists and was not written by --write-grid-study; name another file")
    pts = [study_text(point_overrides(sp.design(v), w)) for v in sp.grid_values() for w in sp.workloads]
    study = {"name": f"{sp.name}-grid", "base": os.path.relpath(sp.base, os.path.dirname(path)),
             "overrides": study_text(sp.overrides), "points": pts}
    tmp = path + f".tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{GRID_HEADER}{sp.path} x its workloads ({n} x {len(sp.workloads)}): generated.\n")
        yaml.safe_dump(study, f, sort_keys=False)
    os.replace(tmp, path)
    print(f"explore {sp.name}: {n} designs x {len(sp.workloads)} workloads -> {args.write_grid_study}")
    return 0


def slurm_screen(args, sp):
    """Screening as a Slurm job array through the sweep's Slurm backend: its points are the
    workers, its simulator a wrapper that runs one worker on the shared study."""
    wrapper = os.path.join(args.out, "worker.sh")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n# A screening worker of scripts/explore, run by the sweep's Slurm backend in place of "
                "kelle-vp (generated).\n")
        f.write(f"exec {sys.executable} {LAUNCHER} {args.space} --out {args.out} "
                f"--kelle-vp {args.kelle_vp} --storage {args.storage} --trials {sp.trials} --sampler {sp.sampler} "
                f"--seed {sp.seed} --worker-run \"$@\"\n")
    os.chmod(wrapper, 0o755)
    study = {"name": f"{sp.name}-workers", "base": sp.base,
             "points": [{"explore_worker": i} for i in range(args.workers)]}
    path = os.path.join(args.out, "workers.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(study, f, sort_keys=False)
    cmd = [os.path.join(ROOT, "scripts", "sweep"), path, "--backend", "slurm", "--out",
           os.path.join(args.out, "workers"), "--kelle-vp", wrapper, "--wait", "--force"] + slurm_options(args)
    rc = subprocess.call(cmd)
    if rc != 0:
        fail("scripts/sweep --backend slurm", f"the screening workers' job array failed (exit {rc}); "
             f"logs in {args.out}/workers/")


