"""A design's quality loss on the project's trained model: the quality command of a design-space
search (scripts/explore's `constraints.quality_command`; docs/explore.md, "Quality as an
objective").

Usage: scripts/quality-loss [--base SCENARIO] [-p key=value ...] [--metric kl|perplexity]
           [--cache FILE] [--json] [--kelle-vp PATH]  < design.json

stdin: one JSON object of scenario overrides (`key.path: value`), a design as scripts/explore
sends it (the space's overrides, then the design's parameters). Only the keys that change what
the trained model computes are applied to the quality run:

  system                  which memories hold the KV (faults model eDRAM cells only)
  policy.*                the KV policy and its budget, window, sinks, recompute mode; the refresh
                          policy and its intervals; the KV format and its group size (every
                          policy key but the timing-only subset bookkeeping exact_sequences,
                          exact_layers, exact_heads, which functional mode refuses)
  functional.*            faults (mode, bit-error rate, group, seed, exposure) and formats

Every other key (the hardware's sizes and bandwidths, the workload, the scheduler, the sampling)
is left out: the quality run is the trained model on its own text, whatever the timing workload.
The run: `kelle-vp run BASE` (default scenarios/functional/quality.yaml: 1023 positions of
held-out text, docs/quality.md) with the -p overrides given here, then the design's quality keys.

It prints the quality loss, one number on one line:
  --metric kl (default)   mean KL divergence of the next-token distributions from the full-cache,
                          full-precision, fault-free reference (results.json
                          quality.full_cache.kl_divergence): eviction, format and faults together
  --metric perplexity     the perplexity's relative change from that reference's
                          (quality.perplexity / quality.full_cache.perplexity - 1)
--json prints the whole record instead (both figures, top-1 agreement, flipped bits, the keys).

Cache: one record per distinct set of quality keys (with the base and the -p overrides), in
--cache (default: quality-cache.jsonl in the folder of $KELLE_EXPLORE_OUT, which scripts/explore
sets to its results folder, else results/quality-loss/quality-cache.jsonl); each run's folder
beside it (quality-runs/<key>/). Designs that differ only in hardware cost one run. Safe for
parallel workers: a run holds its key's lock (the other workers wait for it and then read its
record); the file is appended under its own lock.
"""
import fcntl
import hashlib
import json
import os
import sys
import time

from . import ROOT
from .cli import entry, execute, fail, kelle_vp, parser, run_argv
from .space import design_text
# Policy keys that only the timing mode's subset bookkeeping reads (functional mode refuses them).
TIMING_ONLY = {"policy.exact_sequences", "policy.exact_layers", "policy.exact_heads"}


def quality_keys(design):
    """The design's keys that change the trained model's computation, as -p texts, sorted."""
    out = {}
    for k, v in design.items():
        if k in TIMING_ONLY:
            continue
        if k == "system" or k.startswith("policy.") or k.startswith("functional."):
            out[k] = design_text(v)
    return dict(sorted(out.items()))


class Locked:
    """An exclusive flock on a file, held for a with-block."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.f = open(self.path, "a+")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self.f

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def cached(cache, key):
    if not os.path.isfile(cache):
        return None
    with open(cache) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:  # a line another writer is appending (we hold its key's lock, not the file's)
                continue
            if r.get("key") == key:
                return r
    return None


def record_of(results_path, keys, key, wall):
    with open(results_path) as f:
        r = json.load(f)
    q = r.get("quality", {})
    full = q.get("full_cache", {})
    kl, ppl, ref = full.get("kl_divergence"), q.get("perplexity"), full.get("perplexity")
    if kl is None or ppl is None or not ref:
        fail(results_path, "the quality run reports no quality.full_cache.kl_divergence or perplexity "
             "(is the base a functional-mode scenario with functional.text and its reference on?)")
    return {"key": key, "quality_keys": keys,
            "kl": kl, "perplexity_change": ppl / ref - 1, "perplexity": ppl, "full_cache_perplexity": ref,
            "top1_agreement": full.get("top1_agreement"),
            "flipped_bits": sum((q.get("flipped_bits") or {}).values()),
            "bits_read": sum((q.get("bits_read") or {}).values()),
            "kv_format": r.get("functional", {}).get("kv_format"), "run_wall_s": round(wall, 2)}


@entry("quality-loss")
def main(argv):
    ap = parser("quality-loss", __doc__)
    ap.add_argument("--base", default=os.path.join(ROOT, "scenarios", "functional", "quality.yaml"),
                    help="the quality scenario (default scenarios/functional/quality.yaml)")
    ap.add_argument("-p", action="append", default=[], metavar="KEY=VALUE",
                    help="an override of every quality run, before the design's keys (repeatable)")
    ap.add_argument("--metric", choices=["kl", "perplexity"], default="kl")
    ap.add_argument("--cache", help="the cache file (default: beside the search's storage, see above)")
    ap.add_argument("--json", action="store_true", help="print the whole record")
    ap.add_argument("--kelle-vp", default=os.environ.get("KELLE_VP") or os.path.join(ROOT, "build", "kelle-vp"),
                    help="the simulator (default $KELLE_VP, which scripts/explore sets, else build/kelle-vp)")
    a = ap.parse_args(argv)
    for o in a.p:
        if "=" not in o or not o.split("=", 1)[0]:
            fail(f"-p {o}", "expected key.path=value")
    base = os.path.abspath(a.base)
    if not os.path.isfile(base):
        fail("--base", f"file '{a.base}' not found")
    text = sys.stdin.read()
    try:
        design = json.loads(text) if text.strip() else {}
    except ValueError as e:
        fail("stdin", f"expected a JSON object of key.path: value ({e})")
    if not isinstance(design, dict):
        fail("stdin", "expected a JSON object of key.path: value")
    keys = quality_keys(design)
    ident = json.dumps({"base": os.path.relpath(base, ROOT), "p": a.p, "keys": keys}, sort_keys=True)
    key = hashlib.sha1(ident.encode()).hexdigest()[:16]
    env_out = os.environ.get("KELLE_EXPLORE_OUT")
    cache = os.path.abspath(a.cache or os.path.join(env_out or os.path.join(ROOT, "results", "quality-loss"),
                                                    "quality-cache.jsonl"))
    runs = os.path.join(os.path.dirname(cache), "quality-runs")
    os.makedirs(runs, exist_ok=True)
    # The key's lock: one worker runs a key, the others wait for its record.
    with Locked(os.path.join(runs, f"{key}.lock")):
        rec = cached(cache, key)
        if rec is None:
            vp = kelle_vp(a.kelle_vp)
            folder = os.path.join(runs, key)
            cmd = run_argv(vp, base, folder, a.p + list(keys.items()))
            t0 = time.time()
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "command.txt"), "w") as f:
                f.write(" ".join(cmd) + "\n")
            res, why = execute(cmd, folder)
            if res is None:
                fail("kelle-vp run " + os.path.relpath(base, ROOT) + " " +
                     " ".join(f"-p {k}={v}" for k, v in keys.items()), why)
            rec = record_of(os.path.join(folder, "results.json"), keys, key, time.time() - t0)
            with Locked(cache + ".lock"):
                with open(cache, "a") as f:
                    f.write(json.dumps(rec, sort_keys=True) + "\n")
            rec = dict(rec, cached=False)
        else:
            rec = dict(rec, cached=True)
    if a.json:
        print(json.dumps(rec, sort_keys=True))
    else:
        print(f"{rec['kl'] if a.metric == 'kl' else rec['perplexity_change']:.9g}")
    return 0

