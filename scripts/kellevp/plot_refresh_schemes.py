"""Table and plot of the refresh-schemes study (scenarios/studies/refresh_schemes.yaml).

Usage: scripts/plot-refresh-schemes RESULTS_DIR [--out DIR]

Reads RESULTS_DIR/results.csv (scripts/sweep), prints a Markdown table per point (KV and
activation eDRAM refresh energy, their sum and its saving against the uniform 45 us refresh,
the total energy, expected failed bits by field of the KV and of the activations) and writes
refresh_schemes.{png,svg} into --out (default RESULTS_DIR): the refresh energy of each scheme
relative to the uniform refresh, KV and activations stacked, and the expected failed bits.
Debian's python3 and python3-matplotlib.
"""
import csv
import os
from .cli import entry, fail, parser

SCHEMES = [("uniform", "", "uniform 45 us"), ("2drp", "", "2DRP"), ("shield", "", "SHIELD"),
           ("2drp", "true", "2DRP + lifetime")]


def num(row, key):
    v = row.get(key, "")
    return float(v) if v not in ("", None) else 0.0


def scheme_of(row):
    act = row.get("policy.activation_lifetime", "")
    for pol, a, label in SCHEMES:
        if row.get("policy.refresh") == pol and (act or "") == a:
            return label
    return None


def field_sum(row, prefix, suffix=""):
    """{field: value} of columns prefix.<field>suffix."""
    out = {}
    for k in row:
        if k.startswith(prefix) and k.endswith(suffix) and row[k] != "":
            f = k[len(prefix):len(k) - len(suffix)] if suffix else k[len(prefix):]
            if "." not in f:
                out[f] = float(row[k])
    return out


@entry("plot-refresh-schemes")
def main(argv):
    ap = parser("plot-refresh-schemes", __doc__)
    ap.add_argument("results")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    path = os.path.join(a.results, "results.csv")
    if not os.path.exists(path):
        fail(path, "no such file (run scripts/sweep first)")
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if scheme_of(r)]
    points = sorted({(r["workload.model"], r["workload.task"]) for r in rows})
    table = {}
    for r in rows:
        kv, act = num(r, "energy_breakdown_J.kv_edram_refresh"), num(r, "energy_breakdown_J.act_edram_refresh")
        table[(r["workload.model"], r["workload.task"], scheme_of(r))] = {
            "kv": kv, "act": act, "total": num(r, "energy_J.total"),
            "kv_fail": field_sum(r, "refresh.expected_failed_bits_by_field."),
            "act_fail": field_sum(r, "refresh.activation.by_field.", ".expected_failed_bits"),
            "outlived": num(r, "refresh.activation.outlived"), "buffers": num(r, "refresh.activation.buffers")}
    print("| model | task | scheme | KV refresh | activation refresh | refresh | saving vs uniform | total energy "
          "| KV failed bits by field | activation failed bits by field | buffers outliving the budget |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m, t in points:
        base = table.get((m, t, "uniform 45 us"))
        for _, _, s in SCHEMES:
            e = table.get((m, t, s))
            if not e:
                continue
            ref = e["kv"] + e["act"]
            saving = f"{100 * (1 - ref / (base['kv'] + base['act'])):.1f} %" if base else ""
            kvf = ", ".join(f"{k} {v:.3g}" for k, v in sorted(e["kv_fail"].items())) or "-"
            af = ", ".join(f"{k} {v:.3g}" for k, v in sorted(e["act_fail"].items())) or "-"
            out = f"{e['outlived']:.0f} of {e['buffers']:.0f}" if e["buffers"] else "-"
            print(f"| {m} | {t} | {s} | {e['kv']:.3g} J | {e['act']:.3g} J | {ref:.3g} J | {saving} | "
                  f"{e['total']:.4g} J | {kvf} | {af} | {out} |")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / len(SCHEMES)
    for i, (_, _, s) in enumerate(SCHEMES):
        xs, kv, act, fails = [], [], [], []
        for j, (m, t) in enumerate(points):
            e, base = table.get((m, t, s)), table.get((m, t, "uniform 45 us"))
            if not e or not base:
                continue
            b = base["kv"] + base["act"]
            xs.append(j + (i - (len(SCHEMES) - 1) / 2) * width)
            kv.append(e["kv"] / b)
            act.append(e["act"] / b)
            fails.append(max(sum(e["kv_fail"].values()) + sum(e["act_fail"].values()), 1e-12))
        bars = axes[0].bar(xs, kv, width, label=f"{s}: KV")
        axes[0].bar(xs, act, width, bottom=kv, color=bars.patches[0].get_facecolor() if bars.patches else None,
                    alpha=0.45, hatch="//", label=f"{s}: activations")
        axes[1].bar(xs, fails, width, label=s)
    labels = [f"{m}\n{t}" for m, t in points]
    for ax in axes:
        ax.set_xticks(range(len(points)))
        ax.set_xticklabels(labels, fontsize=8)
    axes[0].axhline(0.65, color="grey", ls=":", label="SHIELD's reported 35 % saving")
    axes[0].set_ylabel("eDRAM refresh energy / uniform 45 us")
    axes[0].legend(fontsize=7, ncol=2)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("expected failed bits (KV + activations)")
    axes[1].legend(fontsize=7)
    fig.suptitle("Refresh schemes on Kelle+eDRAM")
    fig.tight_layout()
    out = a.out or a.results
    os.makedirs(out, exist_ok=True)
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out, f"refresh_schemes.{ext}"), dpi=110)
    print(f"wrote {out}/refresh_schemes.png, .svg")

