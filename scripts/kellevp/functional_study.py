"""Bit-error sensitivity study in functional mode (docs/functional.md, "Sensitivity study").

Reproduces the shape of the paper's Figure 8 on a small seeded Llama-style model: a fixed
bit-error rate is injected into the KV data read from the eDRAM, (a) into every bit, (b) into
the high-score or the low-score tokens only (HST / LST), (c) into bits 15-8 or 7-0 only (MSB /
LSB), and the platform's logits are compared with the fault-free reference model (KL divergence
of the next-token distributions, top-1 agreement). Each point is the mean over --seeds fault
seeds.

  scripts/functional_study                          # build/kelle-vp, writes results/functional_study/
  scripts/functional_study --docs                   # ... into docs/figures/ (the figures the docs quote)
  scripts/functional_study --kelle-vp build-functional/kelle-vp --quick
  scripts/functional_study --out /tmp/study
  scripts/functional_study --formats                # every KV bit, per number format (binary16,
                                                    # bfloat16, fixed16, int8, int4): functional-formats.*
  scripts/functional_study --schemes                # the refresh schemes' retention faults at
                                                    # their intervals: functional-schemes.json

Debian's python3 and python3-matplotlib (hence /usr/bin/python3). Writes functional-sensitivity.{png,svg,json}
(--formats: functional-formats.{png,svg,json}).
"""

import concurrent.futures
import json
import os
import struct
import tempfile

from . import ROOT
from .cli import add_kelle_vp, checked_run, entry, kelle_vp, output_folder, parser

# The study's model and workload (assumptions: small enough to run in well under a second per
# point, big enough for the eDRAM to hold several layers' KV and for heads to disagree).
MODEL = "{name: study-llama, layers: 4, hidden: 128, heads: 8, kv_heads: 4, ffn: 256, vocab: 512}"
BASE = ["-p", "mode=functional", "-p", "workload.model=" + MODEL, "-p", "workload.context_len=48",
        "-p", "workload.decode_len=16", "-p", "workload.progress=false", "-p", "scheduler=kelle",
        # AEP so that tokens have scores (HST / LST groups); a budget above the context: no eviction.
        "-p", "policy.kv=aep", "-p", "policy.kv_budget=128", "-p", "policy.sink_tokens=4",
        "-p", "policy.recent_window=16", "-p", "policy.refresh=none"]
GROUPS = {"a": ["all"], "b": ["hst", "lst"], "c": ["msb", "lsb"]}
# The KV's number formats (functional.kv_format): what a flipped bit does. fixed16's scale: one LSB
# is 2^-10, range +-32 (docs/functional.md, "Number formats").
# int8 and int4 are the cache's own format (policy.kv_format, KIVI's groups: G = 16, the model's
# head_dim; docs/policies/kv-format.md): the reference quantises the same way, so the KL is the
# faults' cost on top of the format's.
FORMATS = {"binary16": [], "bfloat16": [], "fixed16": ["-p", "functional.kv_fixed_scale=0.0009765625"],
           "int8": ["-p", "policy.kv_format=int8", "-p", "policy.kv_group_size=16"],
           "int4": ["-p", "policy.kv_format=int4", "-p", "policy.kv_group_size=16"]}


def run(binary, group, ber, seed, fmt="binary16"):
    with tempfile.TemporaryDirectory() as d:
        cmd = [binary, "run", os.path.join(ROOT, "scenarios/default.yaml")] + BASE + FORMATS[fmt] + [
            "-p", f"functional.kv_format={fmt}",
            "-p", "functional.faults.mode=ber", "-p", f"functional.faults.ber={ber:g}",
            "-p", f"functional.faults.group={group}", "-p", f"functional.faults.seed={seed}", "-o", d, "--force"]
        q = checked_run(cmd, d)["quality"]
    return {"kl": q["kl_divergence"], "top1": q["top1_agreement"],
            "flipped": sum(q["flipped_bits"].values()), "rows": q["rows"]}


@entry("functional_study")
def main(argv):
    ap = parser("functional_study", __doc__)
    add_kelle_vp(ap)
    ap.add_argument("--out", help="tables and plots (default results/functional_study/; --docs: docs/figures/)")
    ap.add_argument("--docs", action="store_true", help="refresh the figures the docs quote (docs/figures/)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer rates, one seed")
    ap.add_argument("--formats", action="store_true", help="every KV bit per number format instead of the groups")
    ap.add_argument("--schemes", action="store_true", help="the refresh schemes' retention faults (steady state)")
    a = ap.parse_args(argv)
    a.binary = kelle_vp(a.kelle_vp)
    a.out = output_folder("functional_study", a.docs, a.out)
    os.makedirs(a.out, exist_ok=True)
    exps = [-7, -6, -5, -4.5, -4, -3.5, -3, -2.5, -2, -1.5, -1]
    if a.quick:
        exps, a.seeds = [-6, -4, -3, -2, -1], 1
    rates = [10 ** e for e in exps]
    if a.formats:
        return formats_study(a, rates)
    if a.schemes:
        return schemes_study(a)
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        for panel, groups in GROUPS.items():
            for g in groups:
                for r in rates:
                    for s in range(1, a.seeds + 1):
                        jobs[(g, r, s)] = ex.submit(run, a.binary, g, r, s)
        base = ex.submit(run, a.binary, "all", 0.0, 1).result()
    data = {"model": MODEL, "overrides": BASE, "seeds": a.seeds, "fault_free": base, "points": []}
    for (g, r, s), f in jobs.items():
        data["points"].append({"group": g, "ber": r, "seed": s, **f.result()})

    def mean(g, r, key):
        v = [p[key] for p in data["points"] if p["group"] == g and p["ber"] == r]
        return sum(v) / len(v)

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "functional-sensitivity.json"), "w") as f:
        json.dump(data, f, indent=1)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharex=True)
    titles = {"a": "(a) every KV bit", "b": "(b) high- vs low-score tokens", "c": "(c) MSB (15-8) vs LSB (7-0)"}
    labels = {"all": "all bits", "hst": "HST", "lst": "LST", "msb": "MSB", "lsb": "LSB"}
    for i, (panel, groups) in enumerate(GROUPS.items()):
        for g in groups:
            kl = [max(mean(g, r, "kl"), 1e-9) for r in rates]
            t1 = [mean(g, r, "top1") for r in rates]
            axes[0][i].plot(rates, kl, marker="o", label=labels[g])
            axes[1][i].plot(rates, t1, marker="o", label=labels[g])
        axes[0][i].axhline(max(base["kl"], 1e-9), color="grey", ls=":", label="no faults (16-bit rounding)")
        axes[0][i].set_title(titles[panel])
        axes[0][i].set_xscale("log")
        axes[0][i].set_yscale("log")
        axes[0][i].legend(fontsize=8)
        axes[1][i].set_xscale("log")
        axes[1][i].set_ylim(-0.05, 1.05)
        axes[1][i].set_xlabel("bit-error rate P")
        axes[1][i].legend(fontsize=8)
    axes[0][0].set_ylabel("KL(reference || platform), mean per token")
    axes[1][0].set_ylabel("top-1 agreement with the reference")
    fig.suptitle("Functional mode: KV-cache bit errors on a 4-layer seeded Llama-style model (shape of the paper's Fig. 8)")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(a.out, f"functional-sensitivity.{ext}"), dpi=110)
    print(f"fault-free KL {base['kl']:.3g}")
    for g in ["all", "hst", "lst", "msb", "lsb"]:
        print(g.ljust(4), " ".join(f"{r:.0e}:{mean(g, r, 'kl'):.2e}/{mean(g, r, 'top1'):.2f}" for r in rates))
    print(f"wrote {a.out}/functional-sensitivity.png, .svg, .json")


# The refresh schemes of scenarios/studies/refresh_schemes.yaml, as policy overrides.
SCHEMES = {"uniform 45 us": ["-p", "policy.refresh=uniform", "-p", "policy.refresh_interval_us=45"],
           "2DRP": ["-p", "policy.refresh=2drp"],
           "SHIELD": ["-p", "policy.refresh=shield"],
           "2DRP + lifetime": ["-p", "policy.refresh=2drp", "-p", "policy.activation_lifetime=true"]}


# The schemes study's text (public domain: the opening of Dickens' A Tale of Two Cities, 1859),
# teacher-forced so that each scheme's perplexity can be set beside the fault-free reference's.
# The seeded model has no tokenizer of its own: a byte-level one (<unk>, <s>, </s>, then one token
# per byte value, then padding up to the vocabulary) is written for it. The perplexity of a seeded
# model is not a language model's; what the study compares is its change under faults.
TEXT = os.path.join(ROOT, "scripts", "data", "two-cities.txt")
VOCAB = 512


def write_byte_tokenizer(path):
    pieces = [b"<unk>", b"<s>", b"</s>"] + [bytes([b]) for b in range(256)]
    pieces += [b"<pad%d>" % i for i in range(VOCAB - len(pieces))]
    with open(path, "wb") as f:
        f.write(struct.pack("<i", max(len(p) for p in pieces)))
        for p in pieces:
            f.write(struct.pack("<fi", 0.0, len(p)) + p)


def run_scheme(binary, scheme, fmt, seed):
    with tempfile.TemporaryDirectory() as d:
        base = BASE[:-2]  # without policy.refresh=none
        tok = os.path.join(d, "tokenizer.bin")
        write_byte_tokenizer(tok)
        out = os.path.join(d, "out")
        cmd = [binary, "run", os.path.join(ROOT, "scenarios/default.yaml")] + base + SCHEMES[scheme] + [
            "-p", f"functional.kv_format={fmt}", "-p", f"functional.act_format={fmt}",
            "-p", "functional.faults.mode=retention", "-p", "functional.faults.exposure=interval",
            "-p", f"functional.faults.seed={seed}", "-p", f"functional.text={TEXT}",
            "-p", f"functional.tokenizer={tok}", "-o", out]
        d = out
        q = checked_run(cmd, d)["quality"]
    return {"kl": q["kl_divergence"], "top1": q["top1_agreement"], "flipped_kv": sum(q["flipped_bits"].values()),
            "flipped_act": sum(q.get("flipped_bits_activations", {}).values()), "rows": q["rows"],
            "perplexity": q["perplexity"], "reference_perplexity": q["reference_perplexity"],
            "perplexity_tokens": q["perplexity_tokens"]}


def schemes_study(a):
    """Quality of each refresh scheme with retention faults at steady state (every bit exposed for
    its interval or budget), binary16 and bfloat16 storage, against the fault-free reference."""
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        for sc in SCHEMES:
            for fmt in ("binary16", "bfloat16"):
                for s in range(1, a.seeds + 1):
                    jobs[(sc, fmt, s)] = ex.submit(run_scheme, a.binary, sc, fmt, s)
    pts = [{"scheme": sc, "format": f, "seed": s, **j.result()} for (sc, f, s), j in jobs.items()]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "functional-schemes.json"), "w") as f:
        json.dump({"model": MODEL, "overrides": BASE, "text": os.path.relpath(TEXT, ROOT), "seeds": a.seeds,
                   "points": pts}, f, indent=1)
    print("| scheme | stored format | KL divergence | top-1 agreement | perplexity (faults off) | flipped KV bits "
          "| flipped activation bits |")
    print("|---|---|---|---|---|---|---|")
    for sc in SCHEMES:
        for fmt in ("binary16", "bfloat16"):
            v = [p for p in pts if p["scheme"] == sc and p["format"] == fmt]
            m = lambda k: sum(p[k] for p in v) / len(v)
            print(f"| {sc} | {fmt} | {m('kl'):.3g} | {m('top1'):.3f} | {m('perplexity'):.2f} "
                  f"({m('reference_perplexity'):.2f}) | {m('flipped_kv'):.1f} | {m('flipped_act'):.1f} |")
    print(f"wrote {a.out}/functional-schemes.json")


def formats_study(a, rates):
    """Panel (a) of the sensitivity study, once per number format of the KV cache."""
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        for fmt in FORMATS:
            for r in rates:
                for s in range(1, a.seeds + 1):
                    jobs[(fmt, r, s)] = ex.submit(run, a.binary, "all", r, s, fmt)
        base = {fmt: ex.submit(run, a.binary, "all", 0.0, 1, fmt).result() for fmt in FORMATS}
    data = {"model": MODEL, "overrides": BASE, "formats": {k: v for k, v in FORMATS.items()}, "seeds": a.seeds,
            "fault_free": base, "points": [{"format": f, "ber": r, "seed": s, **j.result()}
                                           for (f, r, s), j in jobs.items()]}

    def mean(fmt, r, key):
        v = [p[key] for p in data["points"] if p["format"] == fmt and p["ber"] == r]
        return sum(v) / len(v)

    # The threshold: the highest rate whose top-1 agreement stays within 0.02 of the fault-free run
    # and whose KL stays below 10 x the fault-free floor (or 1e-5, whichever is higher).
    data["threshold"] = {}
    for fmt in FORMATS:
        floor = max(10 * base[fmt]["kl"], 1e-5)
        ok = [r for r in rates if mean(fmt, r, "top1") >= base[fmt]["top1"] - 0.02 and mean(fmt, r, "kl") <= floor]
        below = [r for r in rates if all(r2 in ok for r2 in rates if r2 <= r)]
        data["threshold"][fmt] = max(below) if below else None
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "functional-formats.json"), "w") as f:
        json.dump(data, f, indent=1)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for fmt in FORMATS:
        axes[0].plot(rates, [max(mean(fmt, r, "kl"), 1e-9) for r in rates], marker="o", label=fmt)
        axes[1].plot(rates, [mean(fmt, r, "top1") for r in rates], marker="o", label=fmt)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("bit-error rate P (every KV bit)")
        ax.axvline(1e-3, color="grey", ls=":", label="paper's threshold ~1e-3")
        ax.legend(fontsize=8)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("KL(reference || platform), mean per token")
    axes[1].set_ylabel("top-1 agreement with the reference")
    axes[1].set_ylim(-0.05, 1.05)
    fig.suptitle("Functional mode: KV bit errors by number format (4-layer seeded Llama-style model)")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(a.out, f"functional-formats.{ext}"), dpi=110)
    for fmt in FORMATS:
        print(fmt.ljust(9), f"fault-free KL {base[fmt]['kl']:.2e}  threshold {data['threshold'][fmt]}  ",
              " ".join(f"{r:.0e}:{mean(fmt, r, 'kl'):.2e}/{mean(fmt, r, 'top1'):.2f}" for r in rates))
    print(f"wrote {a.out}/functional-formats.png, .svg, .json")

