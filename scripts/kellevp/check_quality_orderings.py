"""Checks the two published orderings of KV eviction on quality studies' results (docs/quality.md).

Usage: scripts/check-quality-orderings RESULTS.csv [RESULTS.csv ...] [--metric perplexity|kl] [--tolerance PCT]
                                      [--markdown FILE] [--json]

RESULTS.csv is what scripts/sweep wrote for a quality study (scenarios/studies/quality_budget.yaml,
quality_sinks.yaml, or any study of the quality path): one row per run with the policy
(`llm.kv_policy`), `policy.kv_budget`, `policy.sink_tokens` and the quality columns
(`quality.perplexity`: the platform's teacher-forced perplexity; `quality.full_cache.perplexity`:
the full-cache reference's over the same tokens; `quality.full_cache.kl_divergence`: the mean KL
divergence of the platform's next-token distributions from the full cache's). --metric says which
one the orderings compare: `perplexity` (default; the published orderings are stated on it) or
`kl` (the distance from the full cache, 0 for the full cache itself; a collapse is a KL above
ln 2 nats, the mean log-probability loss that doubles perplexity, and "within 10 %" is a KL
below ln 1.1). The orderings, each on the rows that state it:

StreamingLLM (Xiao et al., ICLR 2024), on `streaming` rows at one budget with 0 and 4 sinks:
  S1  a recent window without sinks is worse than the same budget with 4 sink tokens
  S2  the window alone collapses: its perplexity is more than twice the full cache's (KL: above ln 2)
  S3  4 sinks recover it: they remove at least half of the window's excess over the full cache
  S4  4 sinks are enough: 8 change the perplexity less than the first 4 did
H2O / SnapKV (score-based eviction against a recent window), on `h2o` and `streaming` rows at
several budgets (the same sinks), and the full cache:
  H1  score-based eviction beats the recent window at the small budgets (N' at most 1/8 of the
      run's positions, context + decode)
  H2  the gap closes as the budget grows: the window's excess perplexity over H2O's at the largest
      budget is below a quarter of that at the smallest, and shrinks from budget to budget
  H3  every policy closes on the full cache: perplexity falls as the budget grows, and at the
      largest budget each is within 10 % of the full cache's (KL: below ln 1.1)

"holds" when it holds at every point it applies to, "fails" otherwise (the points are listed);
an ordering with no rows to apply to is "not run". A comparison "worse"/"better" needs a difference
above TOLERANCE percent (default 0.5: a tie is neither). Exit status 1 when an ordering fails.
--json prints the verdicts as one JSON object (ordering id -> {verdict, points, detail}).
Python 3 standard library only.
"""
import csv
import json
import math
from collections import defaultdict
from .cli import entry, fail, parser


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


DEFAULT_SINKS = {"streaming": 10, "h2o": 0, "aep": 10, "aerp": 10, "full": 0}


def load(paths, metric):
    """(policy, budget, sinks) -> the metric; the full cache's value; the text's positions."""
    runs, full, tokens = {}, [], set()
    for path in paths:
        try:
            with open(path) as f:
                rows = list(csv.DictReader(f))
        except OSError as e:
            fail(path, f"cannot read ({e.strerror or e})")
        for i, r in enumerate(rows, start=2):
            p = r.get("quality.perplexity" if metric == "perplexity" else "quality.full_cache.kl_divergence")
            if num(p) is None:
                fail(f"{path}:{i}", "no quality.perplexity or quality.full_cache (a quality study's results.csv is "
                                    "expected: scripts/sweep scenarios/studies/quality_*.yaml)")
            pol = r.get("llm.kv_policy") or r.get("policy.kv") or "full"
            b = int(num(r.get("policy.kv_budget")) or 0)
            s = num(r.get("policy.sink_tokens"))
            s = DEFAULT_SINKS.get(pol, 0) if s is None else int(s)
            if metric == "perplexity" and num(r.get("quality.full_cache.perplexity")) is not None:
                full.append(num(r["quality.full_cache.perplexity"]))
            if num(r.get("quality.positions")) is not None:  # a timing point's quality run (sweep's quality section)
                tokens.add(int(num(r["quality.positions"])))
            elif num(r.get("llm.context_len")) is not None and num(r.get("llm.decode_len")) is not None:
                tokens.add(int(num(r["llm.context_len"]) + num(r["llm.decode_len"])))
            if pol == "full" and metric == "perplexity":
                if num(r.get("quality.full_cache.perplexity")) is None:  # else the reference's, above
                    full.append(num(p))
            elif pol == "full":
                full.append(0.0)  # the full cache's distance from itself
            else:
                runs[(pol, b, s)] = num(p)
    if len(tokens) > 1:
        fail(f"the results ran different lengths ({sorted(tokens)} positions); compare runs over the same text")
    if metric == "kl" and runs:
        full = [0.0]
    return runs, (sum(full) / len(full) if full else None), (tokens.pop() if tokens else None)


def verdict(applies, bad):
    return "not run" if not applies else ("holds" if not bad else "fails")


def check(runs, full, tokens, tol, metric):
    out = {}
    kl = metric == "kl"
    # A collapse: perplexity above twice the full cache's, or a KL above ln 2 nats (the same mean
    # log-probability loss); close to the full cache: within 10 % of its perplexity, or a KL below ln 1.1.
    collapsed = (lambda v: v > math.log(2)) if kl else (lambda v: v > 2 * full)
    close = (lambda v: v < math.log(1.1)) if kl else (lambda v: v <= 1.1 * full)
    stream = defaultdict(dict)  # budget -> sinks -> perplexity
    for (p, b, s), v in runs.items():
        if p == "streaming":
            stream[b][s] = v
    sb = sorted(b for b, d in stream.items() if 0 in d and 4 in d)
    f = (lambda x: f"{x:.3g}") if kl else (lambda x: f"{x:.2f}")
    bad = [f"N' {b}: {f(stream[b][0])} vs {f(stream[b][4])}" for b in sb if not stream[b][0] > stream[b][4] * (1 + tol)]
    out["S1"] = ("a recent window without sinks is worse than with 4 sinks", sb, bad,
                 "; ".join(f"N' {b}: 0 sinks {f(stream[b][0])}, 4 sinks {f(stream[b][4])}" for b in sb))
    app = sb if full is not None else []
    bad = [f"N' {b}: {f(stream[b][0])}" for b in app if not collapsed(stream[b][0])]
    out["S2"] = ("the window alone collapses (perplexity above twice the full cache's; KL above ln 2)", app, bad,
                 f"full cache {f(full)}" if full is not None else "no full cache")
    bad = [f"N' {b}: excess {f(stream[b][0] - full)} -> {f(stream[b][4] - full)}" for b in app
           if not (stream[b][4] - full) <= 0.5 * (stream[b][0] - full)]
    out["S3"] = ("4 sinks recover at least half of the window's excess over the full cache", app, bad, "")
    s8 = [b for b in sb if 8 in stream[b]]
    bad = [f"N' {b}: 0->4 {f(stream[b][0] - stream[b][4])}, 4->8 {f(stream[b][4] - stream[b][8])}" for b in s8
           if not abs(stream[b][8] - stream[b][4]) < abs(stream[b][0] - stream[b][4])]
    out["S4"] = ("4 sinks are enough (8 change less than the first 4)", s8, bad, "")

    # H2O against the window: the budgets where both ran with their usual sinks.
    h2o = {b: v for (p, b, s), v in runs.items() if p == "h2o"}
    win = {}
    for (p, b, s), v in runs.items():
        if p == "streaming" and s == DEFAULT_SINKS["streaming"]:
            win[b] = v
    hb = sorted(set(h2o) & set(win))
    small = [b for b in hb if b * 8 <= tokens] if tokens else hb[:2]
    bad = [f"N' {b}: H2O {f(h2o[b])} vs window {f(win[b])}" for b in small if not h2o[b] < win[b] * (1 - tol)]
    out["H1"] = ("score-based eviction (H2O) beats a recent window at small budgets", small, bad,
                 "; ".join(f"N' {b}: H2O {f(h2o[b])}, window {f(win[b])}" for b in hb))
    gaps = [(b, win[b] - h2o[b]) for b in hb]
    bad = []
    if len(gaps) >= 2:
        if not gaps[-1][1] < 0.25 * gaps[0][1]:
            bad.append(f"gap at N' {gaps[-1][0]} {f(gaps[-1][1])} not below a quarter of N' {gaps[0][0]}'s {f(gaps[0][1])}")
        scale = max(abs(gaps[0][1]), 1e-12)
        for (b0, g0), (b1, g1) in zip(gaps, gaps[1:]):
            if g1 > g0 + tol * scale:
                bad.append(f"gap grows N' {b0} -> {b1}: {f(g0)} -> {f(g1)}")
    out["H2"] = ("the gap closes as the budget grows", hb if len(gaps) >= 2 else [], bad,
                 "window - H2O: " + ", ".join(f"N' {b} {f(x)}" for b, x in gaps))
    bad, app = [], []
    for pol in sorted({p for p, _, _ in runs}):
        seq = sorted((b, v) for (p, b, s), v in runs.items() if p == pol and s == DEFAULT_SINKS.get(pol, s))
        if len(seq) < 2 or full is None:
            continue
        app.append(pol)
        for (b0, v0), (b1, v1) in zip(seq, seq[1:]):
            if v1 > v0 * (1 + tol):
                bad.append(f"{pol} rises N' {b0} -> {b1}: {f(v0)} -> {f(v1)}")
        if not close(seq[-1][1]):
            bad.append(f"{pol} at N' {seq[-1][0]}: {f(seq[-1][1])} not within 10 % of the full cache ({f(full)})")
    out["H3"] = ("every policy closes on the full cache as the budget grows", app, bad, "")
    return out


@entry("check-quality-orderings")
def main(argv):
    ap = parser("check-quality-orderings", __doc__)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--metric", choices=["perplexity", "kl"], default="perplexity",
                    help="what the orderings compare (default perplexity)")
    ap.add_argument("--tolerance", type=float, default=0.5, help="percent (default 0.5)")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    ap.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    a = ap.parse_args(argv)
    runs, full, tokens = load(a.csv, a.metric)
    res = check(runs, full, tokens, a.tolerance / 100, a.metric)
    failed = 0
    md = ["| ordering | applies to | verdict | measured | where it does not hold |", "|---|---|---|---|---|"]
    js = {}
    for k, (name, applies, bad, detail) in res.items():
        v = verdict(applies, bad)
        failed += v == "fails"
        js[k] = {"ordering": name, "verdict": v, "points": [str(x) for x in applies], "not_holding": bad, "measured": detail}
        where = "; ".join(bad) or "-"
        md.append(f"| {k}: {name} | {', '.join(str(x) for x in applies) or '-'} | {v} | {detail or '-'} | {where} |")
        if not a.json:
            print(f"{v:8s} {k} {name}" + (f": {detail}" if detail else "") + (f"; not on: {where}" if bad else ""))
    if a.json:
        print(json.dumps(js, indent=1))
    else:
        n = sum(1 for k in js if js[k]["verdict"] != "not run")
        print(f"check-quality-orderings ({a.metric}): {n - failed} of {n} orderings hold; {failed} fail"
              + (f" (full cache perplexity {full:.3f}; {tokens} positions)" if full and tokens else ""))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("\n".join(md) + "\n")
    return 1 if failed else 0

