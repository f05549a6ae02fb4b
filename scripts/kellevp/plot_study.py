"""Plots a study's results (Debian's python3-matplotlib; PNG and SVG).

Usage: scripts/plot-study RESULTS.csv [--out DIR] [--baseline original_sram]

Writes DIR/comparison.{png,svg}: speedup and energy efficiency of every system over the
baseline, grouped by (model, task), and DIR/kelle_energy.{png,svg}: the energy breakdown of
Kelle+eDRAM (summed over the study's points) as a pie. A study with a policy.recompute axis
(scenarios/studies/recompute_roofline.yaml) gets DIR/recompute_roofline.{png,svg}: latency and
energy against the share of the popular tokens' rows recomputed, one line per batch, the `auto`
point marked. DIR defaults to the CSV's folder.
"""
import csv
import os
import sys
from collections import defaultdict
from .cli import entry, fail, parser

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot-study: python3-matplotlib is missing (./scripts/setup-deps installs it)")

ORDER = ["original_sram", "original_edram", "aep_sram", "aerp_sram", "kelle_edram"]
NAMES = {"original_sram": "Original+SRAM", "original_edram": "Original+eDRAM", "aep_sram": "AEP+SRAM",
         "aerp_sram": "AERP+SRAM", "kelle_edram": "Kelle+eDRAM"}


def plot_points(rows, out, name):
    labels = [r["scenario"] for r in rows]
    fig, axes = plt.subplots(2, 1, figsize=(max(6, 0.6 * len(rows) + 2), 7), sharex=True)
    axes[0].bar(range(len(rows)), [float(r["latency_s.total"]) for r in rows])
    axes[0].set_ylabel("latency, s")
    axes[1].bar(range(len(rows)), [float(r["energy_J.total"]) for r in rows])
    axes[1].set_ylabel("energy, J")
    axes[1].set_xticks(range(len(rows)))
    axes[1].set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    for a in axes:
        a.grid(axis="y", alpha=0.3)
    fig.suptitle(f"Study {name} (Kelle VP)")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out, f"study.{ext}"), dpi=120)
    print(f"plot-study: figures in {out}")
    return 0


def plot_recompute(rows, out):
    """Latency and energy (normalised to recompute: none) against the share of `all`'s rows."""
    by_batch = defaultdict(dict)
    for r in rows:
        by_batch[r.get("workload.batch") or r.get("llm.batch", "")][r["policy.recompute"]] = r
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for batch, pts in sorted(by_batch.items(), key=lambda kv: float(kv[0] or 0)):
        if "none" not in pts or "all" not in pts:
            continue
        full = float(pts["all"].get("kv.recompute.rows_recomputed") or 0) or 1.0
        none = pts["none"]
        xs = {m: float(r.get("kv.recompute.rows_recomputed") or 0) / full for m, r in pts.items()}
        order = sorted((m for m in pts if m != "auto"), key=lambda m: xs[m])
        for ax, col in ((axes[0], "latency_s.total"), (axes[1], "energy_J.total")):
            ys = [float(pts[m][col]) / float(none[col]) for m in order]
            line, = ax.plot([xs[m] for m in order], ys, marker="o", label=f"batch {batch}")
            if "auto" in pts:
                ax.plot([xs["auto"]], [float(pts["auto"][col]) / float(none[col])], marker="*", markersize=14,
                        color=line.get_color(), linestyle="none")
    for ax, what in ((axes[0], "latency"), (axes[1], "energy")):
        ax.set_xlabel("share of the popular tokens' rows recomputed (all = 1)")
        ax.set_ylabel(f"{what} / {what} without recomputation")
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Recomputation against the hardware (star: policy.recompute auto)")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out, f"recompute_roofline.{ext}"), dpi=120)


@entry("plot-study")
def main(argv):
    ap = parser("plot-study", __doc__)
    ap.add_argument("csv")
    ap.add_argument("--out")
    ap.add_argument("--baseline", default="original_sram")
    args = ap.parse_args(argv)
    out = args.out or os.path.dirname(os.path.abspath(args.csv))
    os.makedirs(out, exist_ok=True)
    points = defaultdict(dict)
    rows = []
    try:
        with open(args.csv) as f:
            for r in csv.DictReader(f):
                rows.append(r)
                # The model and task of a point: its axes, else what it ran (llm.* columns).
                task = r.get("workload.task") or (
                    f'{r["llm.context_len"]} + {r["llm.decode_len"]}' if r.get("llm.context_len") else "")
                key = (r.get("workload.model") or r.get("llm.model", ""), task)
                points[key][r["system"]] = r
    except (OSError, KeyError) as e:
        fail(args.csv, f"cannot read the study's results ({e.strerror if isinstance(e, OSError) else repr(e)})")
    systems = [s for s in ORDER if any(s in p for p in points.values())]
    # Models as named, the paper's tasks in the order of their decode length (others after them).
    task_order = {t: i for i, t in enumerate(["lambada", "triviaqa", "qasper", "pg19"])}
    keys = sorted((k for k, p in points.items() if args.baseline in p),
                  key=lambda k: (k[0], task_order.get(k[1], len(task_order)), k[1]))
    if rows and "policy.recompute" in rows[0]:
        plot_recompute(rows, out)
    if not keys:  # a study of one system: every scenario's latency and energy
        return plot_points(rows, out, os.path.basename(os.path.dirname(os.path.abspath(args.csv))))
    labels = ["\n".join(x for x in k if x) or "default" for k in keys]

    fig, axes = plt.subplots(2, 1, figsize=(max(6, 1.2 * len(keys) + 2), 7), sharex=True)
    width = 0.8 / len(systems)
    for i, s in enumerate(systems):
        sp, ef = [], []
        for k in keys:
            b, r = points[k][args.baseline], points[k].get(s)
            sp.append(float(b["latency_s.total"]) / float(r["latency_s.total"]) if r else 0)
            ef.append(float(r["throughput.tokens_per_J"]) / float(b["throughput.tokens_per_J"]) if r else 0)
        xs = [j + (i - (len(systems) - 1) / 2) * width for j in range(len(keys))]
        axes[0].bar(xs, sp, width, label=NAMES.get(s, s))
        axes[1].bar(xs, ef, width, label=NAMES.get(s, s))
    axes[0].set_ylabel(f"speedup over {NAMES.get(args.baseline, args.baseline)}")
    axes[1].set_ylabel("energy efficiency (tokens/J), normalised")
    for a in axes:
        a.axhline(1.0, color="black", linewidth=0.6)
        a.grid(axis="y", alpha=0.3)
    axes[1].set_xticks(range(len(keys)))
    axes[1].set_xticklabels(labels, fontsize=8)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Main comparison (Kelle VP)")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out, f"comparison.{ext}"), dpi=120)

    parts = defaultdict(float)
    for r in rows:
        if r["system"] != "kelle_edram":
            continue
        for k, v in r.items():
            if k.startswith("energy_breakdown_J.") and v:
                parts[k.split(".", 1)[1]] += float(v)
    if parts:
        total = sum(parts.values())
        big = {k: v for k, v in parts.items() if v >= 0.01 * total}
        big["other"] = total - sum(big.values())
        fig2, ax = plt.subplots(figsize=(6, 6))
        ax.pie(list(big.values()), labels=list(big.keys()), autopct="%1.0f %%", textprops={"fontsize": 8})
        ax.set_title("Kelle+eDRAM energy breakdown")
        fig2.tight_layout()
        for ext in ("png", "svg"):
            fig2.savefig(os.path.join(out, f"kelle_energy.{ext}"), dpi=120)
    print(f"plot-study: figures in {out}")
    return 0

