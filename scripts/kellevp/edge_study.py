"""Today's edge models on the five systems (docs/studies.md, "Today's edge models").

Usage: scripts/edge-study [--out DIR] [--workers N] [--figures DIR | --docs] [--skip-sweep] [--model M]
                          [--kelle-vp PATH]

1. Runs scripts/sweep on scenarios/studies/edge_models.yaml and edge_models_qwen3.yaml into
   DIR/<study>/ (DIR: results/; points already run are kept, as the sweep keeps them).
2. Evaluates the first-order estimate of every point (kelle-vp estimate --designs, the same
   scenario and overrides as the point's run).
3. Writes FIGURES/edge_models_results.csv (every point: the sweep's columns, then `est.*`, the
   estimate's, and the decode step's DRAM bytes by kind), FIGURES/edge_models.md (per model, task
   and batch: Kelle+eDRAM and AERP+SRAM over Original+SRAM, simulated and estimated, the bytes a
   decode step streams, the share of the kept KV the KV eDRAM holds),
   FIGURES/edge_models.{png,svg} and FIGURES/edge_models_kv_share.{png,svg} (the speedup against the
   KV's share of the baseline's DRAM bytes, beside the dense models'); FIGURES: results/edge-study/,
   or docs/figures/ with --docs (the figures docs/studies.md quotes, refreshed on purpose).
The seven dense models of the main comparison (docs/figures/main_results.csv) are the reference.
--model M re-measures one model's points only: a study file of them (the study's, its model axis
M alone) through scripts/sweep into DIR/<study>/, the other points' rows taken as they are from
FIGURES/edge_models_results.csv; the table and the figures are then written from all of them.
"""
import csv
import json
import os
import subprocess
import tempfile
from collections import defaultdict

import yaml

from . import ROOT
from .sweep import load_study
from .cli import Parser, add_kelle_vp, entry, fail, kelle_vp, output_folder, run_argv
from .stats import geomean

STUDIES = ["edge_models", "edge_models_qwen3"]
TASKS = ["lambada", "triviaqa", "qasper", "pg19"]
MODELS = ["gemma3-1b", "mistral-7b-v0.1-swa", "deepseek-v2-lite", "olmoe-1b-7b", "qwen3-30b-a3b"]
KIND = {"gemma3-1b": "local/global windows", "mistral-7b-v0.1-swa": "sliding window",
        "deepseek-v2-lite": "latent KV + MoE", "olmoe-1b-7b": "MoE", "qwen3-30b-a3b": "MoE (GQA)"}
SYSTEMS = ["original_sram", "original_edram", "aep_sram", "aerp_sram", "kelle_edram"]


def study_path(study):
    return os.path.join(ROOT, "scenarios", "studies", study + ".yaml")


def sweep(study, out, workers, vp, model=None):
    path = study_path(study)
    if model:  # the study's points of that model: its file with the model axis narrowed
        name, base, overrides, axes, points, _ = load_study(path)
        doc = {"name": name, "base": base, "overrides": overrides, "axes": {**axes, "workload.model": [model]}}
        if points:
            doc["points"] = points
        tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix=study + "_", delete=False)
        with tmp:
            yaml.safe_dump(doc, tmp, sort_keys=False)
        path = tmp.name
    cmd = [os.path.join(ROOT, "scripts", "sweep"), path, "--out", out, "--kelle-vp", vp]
    if workers:
        cmd += ["--workers", str(workers)]
    print("edge-study: " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd).returncode
    if model:
        os.unlink(path)
    if done != 0:
        fail(f"the sweep of {study} did not complete (its failed points are listed above)")


def estimate(study, rows, vp):
    """The first-order estimate of each row's point (one kelle-vp process per study, the study read
    as scripts/sweep reads it)."""
    _, base, overrides, axes, _, _ = load_study(study_path(study))
    cmd = run_argv(vp, base, overrides=overrides, verb="estimate") + ["--designs", "-"]
    axes = list(axes)
    lines = []
    for r in rows:
        lines.append(json.dumps({k: (int(r[k]) if k == "workload.batch" else r[k]) for k in axes}))
    out = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"kelle-vp estimate: {out.stderr.strip()}")
    res = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    if len(res) != len(rows):
        fail(f"kelle-vp estimate gave {len(res)} results for {len(rows)} points: {out.stderr.strip()}")
    return res


def decode_bytes(point_dir, decode_len):
    """A decode step's DRAM bytes by kind: (the run's total - its prefill's) / decode steps."""
    with open(os.path.join(point_dir, "results.json")) as f:
        r = json.load(f)
    pre = {"dram_weight_bytes": 0.0, "dram_kv_bytes": 0.0}
    steps = os.path.join(point_dir, "steps.csv")
    if os.path.exists(steps):
        with open(steps) as f:
            for row in csv.DictReader(f):
                if row["phase"] == "prefill":
                    pre = {k: float(row[k]) for k in pre}
    t = r["traffic_bytes"]
    n = max(1, decode_len)
    # The share of the KV the system's KV memory holds (Kelle+eDRAM: its 4 MB KV eDRAM) at the end.
    kv_mem = sum(m["capacity_bytes"] for m in r["address_map"] if m["name"] == "kv_edram")
    stored = r["kv"]["kv_bytes_stored"]
    share = min(1.0, kv_mem / stored) if stored > 0 and kv_mem else 0.0
    return ((t["dram_weights"] - pre["dram_weight_bytes"]) / n, (t["dram_kv"] - pre["dram_kv_bytes"]) / n,
            share, r["llm"].get("moe", {}).get("decode", {}).get("experts_per_layer"))


@entry("edge-study")
def main(argv):
    ap = Parser(prog="edge-study", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "results"), help="the sweeps' folders (default results/)")
    ap.add_argument("--figures", help="tables and plots (default results/edge-study/; --docs: docs/figures/)")
    ap.add_argument("--docs", action="store_true", help="refresh the figures the docs quote (docs/figures/)")
    add_kelle_vp(ap)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--skip-sweep", action="store_true", help="use the sweeps' results as they are")
    ap.add_argument("--model", choices=MODELS, help="re-measure this model's points only; the others' rows "
                    "from FIGURES/edge_models_results.csv")
    a = ap.parse_args(argv)
    a.kelle_vp = kelle_vp(a.kelle_vp)
    a.figures = output_folder("edge-study", a.docs, a.figures)

    kept = []  # --model: the other points' rows, as the last full run wrote them
    if a.model:
        path = os.path.join(a.figures, "edge_models_results.csv")
        try:
            with open(path) as f:
                kept = list(csv.DictReader(f))
        except OSError as e:
            fail(path, f"cannot read the full study's rows ({e.strerror}): --model needs them (--docs reads "
                       "docs/figures/'s)")
    rows = []
    for study in STUDIES:
        if a.model and a.model not in load_study(study_path(study))[3]["workload.model"]:
            continue
        out = os.path.join(a.out, study)
        if not a.skip_sweep:
            sweep(study, out, a.workers, a.kelle_vp, a.model)
        path = os.path.join(out, "results.csv")
        try:
            with open(path) as f:
                got = list(csv.DictReader(f))
        except OSError as e:
            fail(f"{path}: {e.strerror} (run the sweep first, without --skip-sweep)")
        for r, e in zip(got, estimate(study, got, a.kelle_vp)):
            if "error" in e:
                fail(f"{study} {r['scenario']}: the estimate refused it: {e['error']}")
            r["est.latency_s.total"] = e["latency_s"]["total"]
            r["est.latency_s.decode_per_step"] = e["latency_s"]["per_decode_step"]
            r["est.energy_J.total"] = e["energy_J"]["total"]
            w, kv, share, experts = decode_bytes(os.path.join(out, r["scenario"]), int(float(r["llm.decode_len"])))
            r["decode_step.dram_weight_bytes"] = w
            r["decode_step.dram_kv_bytes"] = kv
            r["kv.on_chip_share"] = share
            r["llm.moe.decode.experts_per_layer"] = "" if experts is None else experts
            r["study"] = study
            rows.append(r)
    if a.model:  # the new rows in their places among the kept ones
        new = {r["scenario"]: r for r in rows}
        old = {r["scenario"] for r in kept if r["workload.model"] == a.model}
        if set(new) != old:
            fail(f"--model {a.model}: the sweep gave {len(new)} points, the results file has {len(old)}")
        rows = [new[r["scenario"]] if r["workload.model"] == a.model else r for r in kept]

    os.makedirs(a.figures, exist_ok=True)
    cols = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    tmp = os.path.join(a.figures, "edge_models_results.csv.tmp")
    with open(tmp, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=cols)
        wr.writeheader()
        wr.writerows(rows)
    os.replace(tmp, os.path.join(a.figures, "edge_models_results.csv"))

    # (model, task, batch) -> system -> row
    by = defaultdict(dict)
    for r in rows:
        by[(r["workload.model"], r["workload.task"], int(float(r["llm.batch"])))][r["system"]] = r

    def ratio(p, s, over="original_sram", est=False):
        if s not in p or over not in p:
            return float("nan"), float("nan")
        lat = "est.latency_s.total" if est else "latency_s.total"
        en = "est.energy_J.total" if est else "energy_J.total"
        speed = float(p[over][lat]) / float(p[s][lat])
        eff = float(p[over][en]) / float(p[s][en])  # the same tokens: energy per token's ratio
        return speed, eff

    # The seven dense models of the main comparison, per task (batch 16).
    dense = defaultdict(list)
    main_csv = os.path.join(ROOT, "docs", "figures", "main_results.csv")
    mb = defaultdict(dict)
    if os.path.exists(main_csv):
        with open(main_csv) as f:
            for r in csv.DictReader(f):
                mb[(r["workload.model"], r["workload.task"])][r["system"]] = r
        for (m, t), p in mb.items():
            if "kelle_edram" in p and "original_sram" in p:
                dense[t].append((float(p["original_sram"]["latency_s.total"]) / float(p["kelle_edram"]["latency_s.total"]),
                                 float(p["original_sram"]["energy_J.total"]) / float(p["kelle_edram"]["energy_J.total"])))

    md = ["| model | task | batch | Kelle+eDRAM speedup (est.) | energy eff. (est.) | AERP+SRAM speedup | "
          "DRAM MB a decode step, weights / KV (Original+SRAM) | DRAM KV MB a step (Kelle+eDRAM) | KV on chip (Kelle+eDRAM) | experts a layer |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    summary = defaultdict(list)
    for batch in (16, 1):
        for m in MODELS:
            for t in TASKS:
                p = by.get((m, t, batch))
                if not p:
                    continue
                sp, ef = ratio(p, "kelle_edram")
                esp, eef = ratio(p, "kelle_edram", est=True)
                asp, _ = ratio(p, "aerp_sram")
                summary[(m, batch)].append((sp, ef))
                o, k = p.get("original_sram", {}), p.get("kelle_edram", {})
                ow = float(o.get("decode_step.dram_weight_bytes", "nan")) / 1e6
                okv = float(o.get("decode_step.dram_kv_bytes", "nan")) / 1e6
                kkv = float(k.get("decode_step.dram_kv_bytes", "nan")) / 1e6
                layers = f"{100 * float(k['kv.on_chip_share']):.0f} %" if "kv.on_chip_share" in k else ""
                ex = k.get("llm.moe.decode.experts_per_layer", "")
                ex = f"{float(ex):.1f}" if ex not in ("", None) else ""
                md.append(f"| {m} | {t} | {batch} | {sp:.2f} ({esp:.2f}) | {ef:.2f} ({eef:.2f}) | {asp:.2f} | "
                          f"{ow:.0f} / {okv:.0f} | {kkv:.0f} | {layers} | {ex} |")
    md.append("")
    md.append("| model (what is new) | batch 16: speedup, energy eff. (geomean over tasks) | batch 1 |")
    md.append("|---|---|---|")
    for m in MODELS:
        a16, a1 = summary.get((m, 16), []), summary.get((m, 1), [])
        f = lambda v: f"{geomean([x for x, _ in v]):.2f}x, {geomean([y for _, y in v]):.2f}x" if v else "-"
        md.append(f"| {m} ({KIND[m]}) | {f(a16)} | {f(a1)} |")
    if dense:
        allv = [v for t in TASKS for v in dense[t]]
        md.append(f"| the seven dense models (main comparison) | {geomean([x for x, _ in allv]):.2f}x, "
                  f"{geomean([y for _, y in allv]):.2f}x | (not run) |")
    with open(os.path.join(a.figures, "edge_models.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("python3-matplotlib is missing (./scripts/setup-deps installs it)")
    fig, axs = plt.subplots(2, 2, figsize=(13, 7.5), sharex=True)
    labels = MODELS + (["7 dense (main)"] if dense else [])
    width = 0.2
    for col, batch in enumerate((16, 1)):
        for row, which in enumerate(("speedup", "energy efficiency")):
            ax = axs[row][col]
            for i, t in enumerate(TASKS):
                xs, ys, es = [], [], []
                for j, m in enumerate(MODELS):
                    p = by.get((m, t, batch))
                    if not p:
                        continue
                    sim, est = ratio(p, "kelle_edram"), ratio(p, "kelle_edram", est=True)
                    xs.append(j + (i - 1.5) * width)
                    ys.append(sim[row])
                    es.append(est[row])
                if batch == 16 and dense.get(t):
                    xs.append(len(MODELS) + (i - 1.5) * width)
                    ys.append(geomean([v[row] for v in dense[t]]))
                    es.append(float("nan"))
                ax.bar(xs, ys, width, label=t)
                ax.plot(xs, es, "k_", markersize=9, label="first-order estimate" if i == 0 else None)
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_ylim(0, ax.get_ylim()[1] * 1.18)  # room for the legend above the bars
            ax.set_title(f"Kelle+eDRAM over Original+SRAM: {which}, batch {batch}")
            ax.set_xticks(range(len(labels)))
            ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
            ax.set_ylabel(f"{which} (x)")
            if row == 0 and col == 0:
                ax.legend(fontsize=8, ncol=5, loc="upper center")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(a.figures, f"edge_models.{ext}"), dpi=110)
    # Why: Kelle+eDRAM's speedup against the KV's share of the baseline's DRAM bytes (the run's),
    # every point of this study and of the main comparison.
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    def share_speed(p):
        o, k = p["original_sram"], p["kelle_edram"]
        return (float(o["traffic_bytes.dram_kv"]) / float(o["traffic_bytes.dram_total"]),
                float(o["latency_s.total"]) / float(k["latency_s.total"]))
    if os.path.exists(main_csv):
        pts = [share_speed(p) for p in mb.values() if "kelle_edram" in p and "original_sram" in p]
        ax.scatter([x for x, _ in pts], [y for _, y in pts], c="lightgrey", edgecolors="grey", s=30,
                   label="the seven dense models, batch 16 (main comparison)")
    for m, mk in zip(MODELS, "osD^v"):
        for batch, fill in ((16, True), (1, False)):
            pts = [share_speed(p) for (mm, _, b), p in by.items() if mm == m and b == batch
                   and "kelle_edram" in p and "original_sram" in p]
            if pts:
                ax.scatter([x for x, _ in pts], [y for _, y in pts], marker=mk, s=45,
                           facecolors=None if fill else "none", edgecolors="C%d" % MODELS.index(m),
                           c=None if not fill else "C%d" % MODELS.index(m),
                           label=f"{m}, batch {batch}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("KV's share of Original+SRAM's DRAM bytes (whole run)")
    ax.set_ylabel("Kelle+eDRAM speedup over Original+SRAM (x)")
    ax.set_title("The speedup follows the KV's share of the DRAM traffic")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(a.figures, f"edge_models_kv_share.{ext}"), dpi=110)
    print(f"edge-study: wrote {a.figures}/edge_models_results.csv, edge_models.md, edge_models.png, edge_models.svg, "
          "edge_models_kv_share.png, edge_models_kv_share.svg")

