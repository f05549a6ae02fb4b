"""The paper's accuracy experiments on the project's trained model (docs/quality.md).

Usage: scripts/quality-study STUDY [--model kjv-llama|kjv-sinks] [--workers N] [--results DIR] [--out DIR | --docs]
                             [--no-run] [--kelle-vp PATH]

STUDY is one of
  budget    Table 3: quality against the KV budget N' (AERP, H2O, StreamingLLM, full cache)
  policies  Table 2: the KV policies at one budget (N' 128)
  sinks     StreamingLLM's ordering: a recent window with 0, 1, 2, 4, 8 sink tokens
  refresh   Table 4: uniform refresh against 2DRP at three interval sets, retention faults
  ber       Figure 8: a fixed bit-error rate by bit group, per KV number format (binary16,
            bfloat16, fixed16, int8, int4, fp8_e4m3, fp8_e5m2), and each format's fault-free run
            (quality_ber_faultfree.yaml, into --results + _faultfree): the baseline of the
            threshold per format and bit group (the largest P whose perplexity rises < 0.1)
  ber_seeds Figure 8's HST against LST over eight fault seeds (binary16 at 1e-6 to 1e-3, int8 at
            1e-4 to 1e-2): per point the median KL of each group and the seeds where HST costs more
  thermal   the temperature study (b): temperature-aware refresh (uniform 4580 us, 2DRP set 2) with the
            sensor reading 0 to 10 C low against the guard band (die at 95 C), and a sensor
            lagging a 45 -> 95 C heating trace (docs/models/thermal.md, "Studies")
  all       every one of them, in that order

Each study is a study file, scenarios/studies/quality_STUDY.yaml, run by scripts/sweep (the
points already done are skipped; --no-run only reads them) into --results (default
results/quality_STUDY). --model kjv-sinks runs it on the sink model (docs/trained-model.md, "The
sink model") through the overlay scenarios/functional/sink-model.yaml: results into
results/quality_STUDY-sinks, tables and plots named quality-STUDY-sinks. The script then prints the study's table with the paper's numbers
beside it (Markdown), and writes the plot quality-STUDY.{png,svg} and the table
quality-STUDY.md into --out (default results/quality-study/; --docs: docs/figures/, the figures
docs/quality.md quotes, refreshed on purpose). Every figure comes from the runs'
results.csv: the platform's perplexity over the 960 predicted tokens, and its KL divergence and
top-1 agreement against the full-cache, fault-free reference (`quality.full_cache`), or against
the fault-free reference on the same kept tokens for the fault studies.

Debian's python3 with python3-matplotlib (hence /usr/bin/python3).
"""
import csv
import math
import os
import subprocess
from statistics import median
from collections import defaultdict

from . import ROOT
from .cli import add_kelle_vp, entry, fail, output_folder, parser
STUDIES = ["budget", "policies", "sinks", "refresh", "ber", "ber_seeds", "thermal"]
# The trained models: name -> (the overlay that puts it in the quality path's scenario, the suffix
# of its results and figures). kjv-llama is the quality path's own (scenarios/functional/quality.yaml).
MODELS = {"kjv-llama": (None, ""),
          "kjv-sinks": (os.path.join(ROOT, "scenarios", "functional", "sink-model.yaml"), "-sinks")}

# The paper's numbers (docs/quality.md; spec section 9): Llama2-7B.
PAPER_TABLE3 = {  # N' -> (ARC-challenge, PIQA) accuracy, %
    "full": (46.02, 78.75), 512: (46.02, 78.49), 256: (45.92, 77.61), 128: (45.93, 77.35),
    64: (44.63, 75.31), 32: (44.20, 74.14), 16: (38.52, 71.63)}
PAPER_TABLE2 = {"full": 5.47, "streaming": 6.89, "h2o": 5.70, "aerp": 5.74}  # WikiText-2 perplexity
PAPER_TABLE4 = [  # (uniform us, 2DRP set us): ARC-c, ARC-e, PIQA as (uniform, 2DRP)
    (540, (180, 3600, 720, 5400), (45.31, 46.26), (72.85, 73.12), (76.83, 77.44)),
    (1050, (360, 5400, 1440, 7200), (44.19, 45.93), (70.29, 72.78), (76.43, 77.35)),
    (2062, (720, 9000, 2880, 10800), (38.52, 39.78), (66.50, 67.05), (74.97, 75.21))]
# Uniform intervals whose retention failure probability equals each 2DRP set's mean over its four
# groups in the platform's retention model (scenarios/studies/quality_refresh.yaml says how).
EQUAL_RATE_US = [3355, 4580, 7019]
# StreamingLLM (Xiao et al., ICLR 2024), Llama-2-7B perplexity with 0 / 1 / 2 / 4 / 8 sinks.
PAPER_SINKS = {0: 3360, 1: 11.9, 2: 10.5, 4: 9.59, 8: 9.54}
# The KV number formats of Figure 8's study, in the order of scenarios/studies/quality_ber.yaml
# (its policy.kv_format axis); this script draws every format the results hold, in this order first.
FORMATS = ["binary16", "bfloat16", "fixed16", "int8", "int4", "fp8_e4m3", "fp8_e5m2"]
GROUPS = ["all", "hst", "lst", "msb", "lsb"]


def fnum(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def col(r, key, default=None):
    v = r.get(key)
    return default if v in (None, "") else v


def policy(r):
    return col(r, "llm.kv_policy") or col(r, "policy.kv") or "full"


def budget(r):
    return int(float(col(r, "policy.kv_budget", 0) or 0))


def ppl(r):
    return fnum(r.get("quality.perplexity"))


def full_ppl(rows):
    """The full-cache reference's perplexity over the same tokens (every run computes it)."""
    v = [fnum(r.get("quality.full_cache.perplexity")) for r in rows if fnum(r.get("quality.full_cache.perplexity"))]
    return v[0] if v else None


def ppl_label(rows):
    """The perplexity axis's label, with the predicted tokens the runs report."""
    n = sorted({int(fnum(r.get("quality.perplexity_tokens"))) for r in rows
                if fnum(r.get("quality.perplexity_tokens")) is not None})
    return f"perplexity ({' / '.join(map(str, n))} predicted tokens)" if n else "perplexity"


def g(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5):
        return f"{v:.{digits - 1}e}"
    return f"{v:.{digits}g}" if abs(v) < 1 else f"{v:.2f}"


class Dest:
    """Where a study's figures go: the folder, the model's suffix of their names (MODELS) and the
    model's name for their titles."""

    def __init__(self, folder, suffix="", model="kjv-llama"):
        self.folder, self.suffix, self.model = folder, suffix, model


def save(fig, out, name, title=None):
    """The figure, titled and laid out, as OUT/NAME[suffix].png and .svg (out: a Dest)."""
    if title:
        fig.suptitle(title + (f" ({out.model})" if out.suffix else ""))
    fig.tight_layout()
    os.makedirs(out.folder, exist_ok=True)
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out.folder, f"{name}{out.suffix}.{ext}"), dpi=110)


def plt_module():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def table_budget(rows, out):
    full = full_ppl(rows)
    by = {(policy(r), budget(r)): r for r in rows}
    budgets = sorted({b for p, b in by if p != "full"}, reverse=True)
    pols = [p for p in ("aerp", "h2o", "streaming") if any(k[0] == p for k in by)]
    md = ["| N' | " + " | ".join(f"{p} perplexity (KL, top-1)" for p in pols) +
          " | paper, AERP on Llama2-7B: ARC-c / PIQA accuracy |",
          "|---|" + "---|" * len(pols) + "---|"]
    f = next((r for (p, _), r in by.items() if p == "full"), None)
    if f:
        md.append(f"| full cache | {g(ppl(f))} (reference {g(full)}) |" + " |" * (len(pols) - 1) +
                  f" {PAPER_TABLE3['full'][0]} / {PAPER_TABLE3['full'][1]} |")
    for b in budgets:
        cells = []
        for p in pols:
            r = by.get((p, b))
            cells.append("-" if not r else f"{g(ppl(r))} ({g(fnum(r.get('quality.full_cache.kl_divergence')))}, "
                         f"{g(fnum(r.get('quality.full_cache.top1_agreement')))})")
        pa = PAPER_TABLE3.get(b)
        md.append(f"| {b} | " + " | ".join(cells) + f" | {pa[0]} / {pa[1]} |" if pa else f"| {b} | " + " | ".join(cells) + " | - |")
    plt = plt_module()
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    for p in pols:
        bs = [b for b in sorted(budgets) if (p, b) in by]
        ax[0].plot(bs, [ppl(by[(p, b)]) for b in bs], marker="o", label=p)
        ax[1].plot(bs, [fnum(by[(p, b)].get("quality.full_cache.kl_divergence")) for b in bs], marker="o", label=p)
    if full:
        ax[0].axhline(full, color="grey", ls=":", label=f"full cache ({full:.2f})")
    for a in ax:
        a.set_xscale("log", base=2)
        a.set_xlabel("KV budget N' (tokens per head)")
        a.legend(fontsize=8)
    ax[0].set_ylabel(ppl_label(rows))
    ax[1].set_yscale("log")
    ax[1].set_ylabel("KL(full cache || platform), mean per token")
    ax2 = ax[0].twinx()
    pb = [b for b in sorted(budgets) if b in PAPER_TABLE3]
    ax2.plot(pb, [PAPER_TABLE3[b][0] for b in pb], color="black", ls="--", marker="x", label="paper ARC-c (%)")
    ax2.set_ylabel("paper: Llama2-7B ARC-challenge accuracy (%)")
    ax2.legend(fontsize=8, loc="center right")
    save(fig, out, "quality-budget", "Table 3 on the trained model: quality against the KV budget")
    return md


def table_policies(rows, out):
    full = full_ppl(rows)

    def name(r):
        p = policy(r)
        if p == "aerp" and col(r, "policy.recompute") == "all":
            return f"aerp, every popular token as x ({col(r, 'functional.x_tokens', 'recompute')})"
        return p
    md = ["| policy (N' 128) | perplexity | vs full cache: KL | top-1 | x tokens (end) | paper: WikiText-2 perplexity, Llama2-7B |",
          "|---|---|---|---|---|---|"]
    names, vals, kls = [], [], []
    for r in rows:
        n = name(r)
        paper = PAPER_TABLE2.get(policy(r)) if "x" not in n.split(",")[-1] else None
        md.append(f"| {n} | {g(ppl(r))} | {g(fnum(r.get('quality.full_cache.kl_divergence')))} | "
                  f"{g(fnum(r.get('quality.full_cache.top1_agreement')))} | {g(fnum(r.get('kv.tokens_as_x')) or 0.0)} | "
                  f"{paper if paper else '-'} |")
        names.append(n.replace(", every popular token as x", "\nall x"))
        vals.append(ppl(r))
        kls.append(max(fnum(r.get("quality.full_cache.kl_divergence")) or 0, 1e-9))
    md.append(f"| (full-cache reference, fp32) | {g(full)} | | | | |")
    plt = plt_module()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    ax = axes[0]
    ax.bar(range(len(vals)), vals, color="tab:blue")
    if full:
        ax.axhline(full, color="grey", ls=":", label=f"full-cache reference ({full:.2f})")
    ax.set_ylabel(ppl_label(rows))
    ax.set_ylim(min(v for v in vals if v) * 0.95, max(vals) * 1.02)
    ax.legend(fontsize=8)
    axes[1].bar(range(len(kls)), kls, color="tab:orange")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("KL(full cache || platform), mean per token")
    for a in axes:
        a.set_xticks(range(len(vals)))
        a.set_xticklabels(names, fontsize=7)
    save(fig, out, "quality-policies", "Table 2 on the trained model: KV policies at N' = 128")
    return md


def table_sinks(rows, out):
    full = full_ppl(rows)
    by = {(budget(r), int(float(col(r, "policy.sink_tokens", 10)))): r for r in rows}
    budgets = sorted({b for b, _ in by})
    sinks = sorted({s for _, s in by})
    md = ["| sink tokens | " + " | ".join(f"N' {b}: perplexity (KL vs full)" for b in budgets) +
          " | paper: StreamingLLM, Llama-2-7B perplexity |", "|---|" + "---|" * len(budgets) + "---|"]
    for s in sinks:
        cells = [f"{g(ppl(by[(b, s)]))} ({g(fnum(by[(b, s)].get('quality.full_cache.kl_divergence')))})"
                 if (b, s) in by else "-" for b in budgets]
        md.append(f"| {s} | " + " | ".join(cells) + f" | {PAPER_SINKS.get(s, '-')} |")
    md.append(f"| full cache | {g(full)} |" + " |" * len(budgets))
    plt = plt_module()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for b in budgets:
        ss = [s for s in sinks if (b, s) in by]
        ax.plot([max(s, 0.5) for s in ss], [ppl(by[(b, s)]) for s in ss], marker="o", label=f"window, N' = {b}")
    if full:
        ax.axhline(full, color="grey", ls=":", label=f"full cache ({full:.2f})")
    ax.set_xscale("log", base=2)
    ax.set_xticks([0.5, 1, 2, 4, 8])
    ax.set_xticklabels(["0", "1", "2", "4", "8"])
    ax.set_xlabel("sink tokens kept (StreamingLLM)")
    ax.set_ylabel(ppl_label(rows))
    ax.legend(fontsize=8)
    save(fig, out, "quality-sinks", "StreamingLLM's ordering on the trained model")
    return md


def mean(vals):
    v = [x for x in vals if x is not None]
    return sum(v) / len(v) if v else None


def table_refresh(rows, out):
    groups = defaultdict(list)
    for r in rows:
        if col(r, "policy.refresh") == "uniform":
            key = ("uniform", int(float(r["policy.refresh_interval_us"])))
        else:
            key = ("2drp", tuple(int(float(r[f"policy.{k}_us"])) for k in ("hst_msb", "hst_lsb", "lst_msb", "lst_lsb")))
        groups[key].append(r)

    def stats(rs):
        flips = sum(sum(fnum(r.get(f"quality.flipped_bits.{k}")) or 0 for k in ("hst_msb", "hst_lsb", "lst_msb", "lst_lsb")) for r in rs)
        read = sum(sum(fnum(r.get(f"quality.bits_read.{k}")) or 0 for k in ("hst_msb", "hst_lsb", "lst_msb", "lst_lsb")) for r in rs)
        return (mean([ppl(r) for r in rs]), mean([fnum(r.get("quality.kl_divergence")) for r in rs]),
                mean([fnum(r.get("quality.top1_agreement")) for r in rs]), flips / read if read else None,
                mean([fnum(r.get("quality.reference_perplexity")) for r in rs]), len(rs))
    md = ["| interval set | scheme | perplexity (fault-free) | KL vs fault-free | top-1 | flip rate (bits read) | "
          "paper ARC-c / ARC-e / PIQA |", "|---|---|---|---|---|---|---|"]
    pts = []
    for i, (u, s, arcc, arce, piqa) in enumerate(PAPER_TABLE4):
        for scheme, key, j in (("uniform " + str(u) + " us", ("uniform", u), 0),
                               ("2DRP " + ", ".join(map(str, s)) + " us", ("2drp", s), 1),
                               (f"uniform {EQUAL_RATE_US[i]} us (2DRP's mean failure rate)",
                                ("uniform", EQUAL_RATE_US[i]), 2)):
            if key not in groups:
                continue
            p, kl, t1, fr, ref, n = stats(groups[key])
            pts.append((i, j, p, kl, fr))
            paper = f"{arcc[j]} / {arce[j]} / {piqa[j]}" if j < 2 else "-"
            md.append(f"| {i + 1} | {scheme} | {g(p)} ({g(ref)}) | {g(kl)} | {g(t1)} | {g(fr)} | {paper} |")
    plt = plt_module()
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for j, name in ((0, "uniform (paper's intervals)"), (1, "2DRP"), (2, "uniform at 2DRP's mean failure rate")):
        xs = [i + 1 for i, jj, *_ in pts if jj == j]
        ax[0].plot(xs, [p for i, jj, p, kl, fr in pts if jj == j], marker="o", label=name)
        ax[1].plot(xs, [max(kl or 0, 1e-9) for i, jj, p, kl, fr in pts if jj == j], marker="o", label=name)
    for a in ax:
        a.set_xticks([1, 2, 3])
        a.set_xticklabels(["set 1: 540 us /\n180..5400 /\n3355 us", "set 2: 1050 us /\n360..7200 /\n4580 us",
                           "set 3: 2062 us /\n720..10800 /\n7019 us"], fontsize=7)
        a.legend(fontsize=8)
    ax[0].set_ylabel(ppl_label(rows))
    ax[1].set_yscale("log")
    ax[1].set_ylabel("KL(fault-free || platform), mean per token")
    save(fig, out, "quality-refresh", "Table 4 on the trained model: uniform refresh against 2DRP, retention faults")
    return md


# Figure 8's criterion: the perplexity rises by less than 0.1 below the threshold (the paper's
# "perplexity rises by < 0.1 below P = 1e-3" on Llama2-7B), over the format's fault-free run
# (scenarios/studies/quality_ber_faultfree.yaml).
BER_RISE = 0.1


def ber_threshold(rates, ppls, ref):
    """The largest rate at which the perplexity, and at every lower rate measured, is within
    BER_RISE of the fault-free run's: (rate or None if the lowest already fails, all hold)."""
    thr = None
    for x, p in zip(rates, ppls):
        if p is None or ref is None or p - ref >= BER_RISE:
            return thr, False
        thr = x
    return thr, True


def threshold_text(t):
    thr, held = t
    return f">= {thr:g}" if held else (f"{thr:g}" if thr is not None else "below the lowest P")


def table_ber(rows, out, faultfree=()):
    data = defaultdict(list)
    for r in rows:
        data[(col(r, "policy.kv_format") or col(r, "functional.kv_format", "binary16"), col(r, "functional.faults.group", "all"),
              float(r["functional.faults.ber"]))].append(r)
    fmts = [f for f in FORMATS if any(k[0] == f for k in data)] + sorted({k[0] for k in data} - set(FORMATS))
    rates = sorted({k[2] for k in data})
    md = ["| format | bits | " + " | ".join(f"P {x:g}" for x in rates) + " |", "|---|---|" + "---|" * len(rates)]
    for f in fmts:
        for grp in GROUPS:
            if not any((f, grp, x) in data for x in rates):
                continue
            cells = [f"{g(mean([ppl(r) for r in data[(f, grp, x)]]))} ({g(mean([fnum(r.get('quality.kl_divergence')) for r in data[(f, grp, x)]]))})"
                     if (f, grp, x) in data else "-" for x in rates]
            md.append(f"| {f} | {grp} | " + " | ".join(cells) + " |")
    # Each format's fault-free run (the baseline of its threshold: what its bit errors alone cost);
    # without one, the fault-free reference's perplexity on the same kept tokens.
    base = {col(r, "policy.kv_format") or col(r, "functional.kv_format", "binary16"): ppl(r) for r in faultfree}
    refs = {f: base.get(f) or mean([fnum(r.get("quality.reference_perplexity"))
                                    for k, rs in data.items() if k[0] == f for r in rs]) for f in fmts}
    md.append("| fault-free run | | " + ", ".join(f"{f} {g(refs[f])}" for f in fmts) + " |" +
              " |" * (len(rates) - 1))
    md.append("| paper (Llama2-7B, WikiText-2, every bit) | all | perplexity rises by < 0.1 below P = 1e-3, sharply above |" +
              " |" * (len(rates) - 1))
    # The threshold per format and bit group: the largest P whose perplexity (and every lower P's)
    # stays within BER_RISE of the fault-free reference's.
    thresholds = {}
    for f in fmts:
        for grp in GROUPS:
            xs = [x for x in rates if (f, grp, x) in data]
            if xs:
                thresholds[(f, grp)] = ber_threshold(xs, [mean([ppl(r) for r in data[(f, grp, x)]]) for x in xs],
                                                     refs[f])
    md.append("")
    md.append(f"Threshold: the largest P at which the perplexity (and at every lower P) rises by less than "
              f"{BER_RISE:g} over the format's fault-free run's; the paper: about 1e-3, every bit, Llama2-7B.")
    md.append("")
    md.append("| format | " + " | ".join(GROUPS) + " |")
    md.append("|---|" + "---|" * len(GROUPS))
    for f in fmts:
        md.append(f"| {f} | " + " | ".join(threshold_text(thresholds[(f, grp)]) if (f, grp) in thresholds else "-"
                                          for grp in GROUPS) + " |")
    plt = plt_module()
    fig, ax = plt.subplots(2, len(fmts), figsize=(4.2 * len(fmts), 7), sharex=True, squeeze=False)
    for i, f in enumerate(fmts):
        for grp in GROUPS:
            xs = [x for x in rates if (f, grp, x) in data]
            if not xs:
                continue
            ax[0][i].plot(xs, [mean([ppl(r) for r in data[(f, grp, x)]]) for x in xs], marker="o",
                          label=f"{grp}: threshold {threshold_text(thresholds[(f, grp)])}")
            ax[1][i].plot(xs, [max(mean([fnum(r.get("quality.kl_divergence")) for r in data[(f, grp, x)]]) or 0, 1e-9)
                               for x in xs], marker="o", label=grp)
        ax[0][i].set_title(f)
        if refs[f]:
            ax[0][i].axhline(refs[f], color="grey", ls=":", label=f"fault-free ({refs[f]:.2f})")
        for a in (ax[0][i], ax[1][i]):
            a.set_xscale("log")
            a.set_yscale("log")
            a.axvline(1e-3, color="black", ls="--", lw=0.8, label="paper's threshold ~1e-3")
            a.legend(fontsize=7)
        ax[1][i].set_xlabel("bit-error rate P")
    ax[0][0].set_ylabel(ppl_label(rows))
    ax[1][0].set_ylabel("KL(fault-free || platform), mean per token")
    save(fig, out, "quality-ber", "Figure 8 on the trained model: KV bit errors by group and number format")
    return md


def table_ber_seeds(rows, out):
    """HST against LST at each (format, P), seed by seed: with one seed, which group receives a run's
    one damaging flip decides the ordering; over several the medians and the count say it."""
    data = defaultdict(dict)
    for r in rows:
        key = (col(r, "policy.kv_format", "binary16"), float(r["functional.faults.ber"]))
        data[key][(col(r, "functional.faults.group"), int(float(r["functional.faults.seed"])))] = r
    keys = sorted(data, key=lambda k: (FORMATS.index(k[0]) if k[0] in FORMATS else len(FORMATS), k[1]))
    def kl(r):
        return fnum(r.get("quality.kl_divergence")) or 0.0
    def flips(r):
        return sum(fnum(v) or 0 for c, v in r.items() if c.startswith("quality.flipped_bits."))
    md = ["| KV format | P | HST: KL median (range) | LST: KL median (range) | seeds where HST costs more (KL) | "
          "perplexity median, HST / LST | flipped bits per run, HST / LST |", "|---|---|---|---|---|---|---|"]
    plt = plt_module()
    fig, axs = plt.subplots(1, len({k[0] for k in keys}), figsize=(5.5 * len({k[0] for k in keys}), 4.5), squeeze=False)
    fmts = sorted({k[0] for k in keys}, key=lambda f: FORMATS.index(f) if f in FORMATS else len(FORMATS))
    for key in keys:
        m = data[key]
        seeds = sorted({sd for grp, sd in m if (("hst", sd) in m and ("lst", sd) in m)})
        h = [kl(m[("hst", sd)]) for sd in seeds]
        lo = [kl(m[("lst", sd)]) for sd in seeds]
        ph = [ppl(m[("hst", sd)]) for sd in seeds]
        pl = [ppl(m[("lst", sd)]) for sd in seeds]
        more = sum(1 for a, b in zip(h, lo) if a > b)
        md.append(f"| {key[0]} | {key[1]:g} | {g(median(h))} ({g(min(h))} to {g(max(h))}) | {g(median(lo))} ({g(min(lo))} to "
                  f"{g(max(lo))}) | {more} of {len(seeds)} | {median(ph):.2f} / {median(pl):.2f} | "
                  f"{mean([flips(m[('hst', sd)]) for sd in seeds]):.0f} / {mean([flips(m[('lst', sd)]) for sd in seeds]):.0f} |")
        a = axs[0][fmts.index(key[0])]
        a.scatter([max(x, 1e-9) for x in lo], [max(x, 1e-9) for x in h], label=f"P {key[1]:g}", s=18)
    for i, f in enumerate(fmts):
        a = axs[0][i]
        a.set_xscale("log")
        a.set_yscale("log")
        lim = a.get_xlim()[0], a.get_xlim()[1]
        lo_, hi_ = min(lim[0], a.get_ylim()[0]), max(lim[1], a.get_ylim()[1])
        a.plot([lo_, hi_], [lo_, hi_], color="grey", ls=":", lw=0.8)
        a.set_xlabel("KL with LST flips (one seed)")
        a.set_ylabel("KL with HST flips (same seed)")
        a.set_title(f"{f}: above the diagonal, HST costs more")
        a.legend(fontsize=7)
    save(fig, out, "quality-ber_seeds")
    return md


def flip_rate(r):
    """Flipped bits per bit read, over the four bit groups."""
    ks = ("hst_msb", "hst_lsb", "lst_msb", "lst_lsb")
    read = sum(fnum(r.get(f"quality.bits_read.{k}")) or 0 for k in ks)
    return sum(fnum(r.get(f"quality.flipped_bits.{k}")) or 0 for k in ks) / read if read else None


def table_thermal(rows, out):
    """The temperature study (b) (scenarios/studies/quality_thermal.yaml): per refresh scheme, the die at
    95 C with the sensor reading low against the guard band, then the sensor lagging a heating trace."""
    schemes = [s for s in ("uniform", "2drp") if any(col(r, "policy.refresh") == s for r in rows)]
    name = {"uniform": "uniform 4580 us", "2drp": "2DRP 360, 5400, 1440, 7200 us"}
    const, trace = defaultdict(dict), defaultdict(dict)
    for r in rows:
        s, gb = col(r, "policy.refresh"), float(col(r, "policy.guard_band_C", 5))
        if col(r, "thermal.model") == "constant":
            const[s][(float(col(r, "thermal.sensor.offset_C", 0)), gb)] = r
        else:
            trace[s][(float(col(r, "thermal.sensor.period_us", 1000)), gb)] = r
    offsets = sorted({o for s in const for o, _ in const[s]}, reverse=True)
    gbs = sorted({gb for s in const for _, gb in const[s]} | {gb for s in trace for _, gb in trace[s]})
    kl_full = lambda r: fnum(r.get("quality.full_cache.kl_divergence"))
    kl_ff = lambda r: fnum(r.get("quality.kl_divergence"))
    refresh_J = lambda r: fnum(r.get("energy_J.edram_refresh"))
    ref = mean([fnum(r.get("quality.reference_perplexity")) for r in rows])
    cgbs = [gb for gb in gbs if any((o, gb) in const[s] for s in const for o in offsets)]

    def matrix(title, cell):
        m = ["", title, "", "| scheme | sensor offset C | " + " | ".join(f"guard band {gb:g} C" for gb in cgbs) + " |",
             "|---|---|" + "---|" * len(cgbs)]
        for s in schemes:
            for o in offsets:
                m.append(f"| {name[s]} | {o:g} | " + " | ".join(cell(const[s][(o, gb)]) if (o, gb) in const[s] else "-"
                                                            for gb in cgbs) + " |")
        return m
    md = [f"Fault-free reference (same kept tokens) perplexity {g(ref)}; full cache {g(full_ppl(rows))}."]
    md += matrix("Die at 95 C: perplexity (KL vs the full cache):", lambda r: f"{g(ppl(r))} ({g(kl_full(r))})")
    md += matrix("Die at 95 C: KL vs the fault-free reference (flipped bits per bit read):",
                 lambda r: f"{g(kl_ff(r))} ({g(flip_rate(r))})")
    md += matrix("Die at 95 C: the run's eDRAM refresh energy (uJ):", lambda r: f"{refresh_J(r) * 1e6:.0f}")
    # The transient: 45 -> 95 C linearly over 32 ms (1.5625 C per ms); a sensor sampled every
    # period reads up to rate x period behind (plus its 1 C rounding).
    rate = 50 / 32000.0
    md += ["", "Die heating from 45 to 95 C over the run, the sensor sampled every period:", "",
           "| scheme | sensor period us | lags by up to C | guard band C | perplexity | KL vs full cache | "
           "KL vs fault-free | top-1 vs fault-free | flipped bits per bit read | eDRAM refresh uJ |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for s in schemes:
        for per, gb in sorted(trace[s]):
            r = trace[s][(per, gb)]
            md.append(f"| {name[s]} | {per:g} | {rate * per:.1f} | {gb:g} | {g(ppl(r))} | {g(kl_full(r))} | {g(kl_ff(r))} | "
                      f"{g(fnum(r.get('quality.top1_agreement')))} | {g(flip_rate(r))} | {refresh_J(r) * 1e6:.0f} |")
    plt = plt_module()
    fig, ax = plt.subplots(len(schemes), 4, figsize=(19, 4 * len(schemes)), squeeze=False)
    for i, s in enumerate(schemes):
        for o in offsets:
            xs = [gb for gb in cgbs if (o, gb) in const[s]]
            ax[i][0].plot(xs, [ppl(const[s][(o, gb)]) for gb in xs], marker="o", label=f"sensor offset {o:g} C")
            ax[i][1].plot(xs, [max(kl_full(const[s][(o, gb)]) or 0, 1e-9) for gb in xs], marker="o",
                          label=f"sensor offset {o:g} C")
            ax[i][2].plot(xs, [max(kl_ff(const[s][(o, gb)]) or 0, 1e-9) for gb in xs], marker="o",
                          label=f"sensor offset {o:g} C")
        for k, gb in enumerate(sorted({gb for _, gb in trace[s]})):
            ps = sorted(p for p, b in trace[s] if b == gb)
            for kl, ls, what in ((kl_full, "-", "vs full cache"), (kl_ff, "--", "vs fault-free")):
                ax[i][3].plot([rate * p for p in ps], [max(kl(trace[s][(p, gb)]) or 0, 1e-9) for p in ps], marker="o",
                              ls=ls, color=f"C{k}", label=f"guard band {gb:g} C, KL {what}")
            for p in ps:
                ax[i][3].annotate(f"{p:g} us", (rate * p, max(kl_ff(trace[s][(p, gb)]) or 0, 1e-9)), fontsize=7,
                                  textcoords="offset points", xytext=(4, 4))
        exact = const[s].get((0.0, 0.0))
        if exact:
            for a, kl in ((ax[i][1], kl_full), (ax[i][2], kl_ff)):
                a.axhline(kl(exact), color="grey", ls=":", label="exact sensor, guard band 0")
        if ref:
            ax[i][0].axhline(ref, color="grey", ls="--", lw=0.8, label=f"fault-free ({ref:.2f})")
        ax[i][0].set_ylabel(f"{name[s]}\n" + ppl_label(rows))
        ax[i][1].set_ylabel("KL(full cache || platform), mean per token")
        ax[i][2].set_ylabel("KL(fault-free || platform), mean per token")
        ax[i][3].set_ylabel("KL, mean per token")
        for j in range(3):
            ax[i][j].set_xlabel("guard band (C)")
            ax[i][j].set_xticks(cgbs)
            ax[i][j].set_title("die at 95 C, sensor reading low")
        ax[i][3].set_xlabel("sensor lag at most (C): heating 1.56 C/ms x sensor period")
        ax[i][3].set_title("die heating 45 -> 95 C, sensor lagging")
        for a in ax[i]:
            a.legend(fontsize=7)
        for a in ax[i][1:]:
            a.set_yscale("log")
    save(fig, out, "quality-thermal", "Temperature-aware refresh on the trained model: a sensor reading low or lagging")
    return md


TABLES = {"budget": table_budget, "policies": table_policies, "sinks": table_sinks, "refresh": table_refresh,
          "ber": table_ber, "ber_seeds": table_ber_seeds, "thermal": table_thermal}


@entry("quality-study")
def main(argv):
    ap = parser("quality-study", __doc__)
    ap.add_argument("study", choices=STUDIES + ["all"])
    ap.add_argument("--model", choices=sorted(MODELS), default="kjv-llama",
                    help="the trained model (default kjv-llama; kjv-sinks: the sink model)")
    ap.add_argument("--workers", type=int, default=2, help="runs at once (default 2)")
    ap.add_argument("--results", help="the sweep's results folder (default results/quality_STUDY)")
    ap.add_argument("--out", help="plots and tables (default results/quality-study/; --docs: docs/figures/)")
    ap.add_argument("--docs", action="store_true", help="refresh the figures the docs quote (docs/figures/)")
    ap.add_argument("--no-run", action="store_true", help="only read the results already there")
    add_kelle_vp(ap)
    a = ap.parse_args(argv)
    a.out = output_folder("quality-study", a.docs, a.out)
    if a.results and a.study == "all":
        ap.error("--results names one study's folder; give one study")
    overlay, suffix = MODELS[a.model]
    def results(study, res):
        if not a.no_run:
            rc = subprocess.call([os.path.join(ROOT, "scripts", "sweep"),
                                  os.path.join(ROOT, "scenarios", "studies", f"quality_{study}.yaml"),
                                  "--workers", str(a.workers), "--out", res, "--kelle-vp", a.kelle_vp]
                                 + (["--overlay", overlay] if overlay else []))
            if rc != 0:
                fail(f"the sweep of quality_{study} failed (exit {rc}; its failed points are listed above)")
        path = os.path.join(res, "results.csv")
        if not os.path.isfile(path):
            fail(path, "no results (run without --no-run)")
        return load(path)

    for st in STUDIES if a.study == "all" else [a.study]:
        res = a.results or os.path.join(ROOT, "results", f"quality_{st}{suffix}")
        rows = results(st, res)
        dest = Dest(a.out, suffix, a.model)
        if st == "ber":  # the baseline: each format's fault-free run
            md = table_ber(rows, dest, results("ber_faultfree", res.rstrip("/") + "_faultfree"))
        else:
            md = TABLES[st](rows, dest)
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, f"quality-{st}{suffix}.md"), "w") as f:
            f.write("\n".join(md) + "\n")
        print("\n".join(md))
        print(f"quality-study: wrote {a.out}/quality-{st}{suffix}.png, .svg, .md")
    return 0

