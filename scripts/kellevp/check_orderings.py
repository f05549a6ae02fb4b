"""Checks the paper's orderings (spec section 5) on the main comparison's table.

Usage: scripts/check-orderings RESULTS.csv [--markdown FILE]

RESULTS.csv is what scripts/sweep wrote for the main study (scripts/reproduce-paper). Each
ordering is checked on every (model, task) point where both systems ran and on the geometric
mean over the points: "holds" when it holds on every point, "mean only" when the mean keeps it
but some points do not (they are listed), "fails" otherwise. An ordering the paper states as an
improvement of x (speedup or energy-efficiency ratio) is checked as a ratio above 1 + TOLERANCE
(default 0.5 %: a tie is not an improvement); a worsening as a ratio below 1 - TOLERANCE.
Exit status 1 when an ordering fails (docs/studies.md says why, with the measurement).
Python 3 standard library only.
"""
import math
from collections import defaultdict

# The comparison's own reading of the CSV, system names and task order (scripts/compare-paper).
from . import compare_paper as cp
from .cli import entry, parser
from .compare_paper import NAMES, TASKS
from .stats import geomean

# (system, over, figure, sense): sense +1 the paper reports system better than over, -1 worse.
PAIRS = [
    ("kelle_edram", "original_sram", "speedup", +1),
    ("kelle_edram", "original_sram", "efficiency", +1),
    ("original_edram", "original_sram", "speedup", +1),
    ("original_edram", "original_sram", "efficiency", -1),  # 39 % worse: refresh
    ("aep_sram", "original_sram", "speedup", +1),
    ("aep_sram", "original_sram", "efficiency", +1),
    ("aerp_sram", "aep_sram", "speedup", +1),
    ("aerp_sram", "aep_sram", "efficiency", +1),
    ("kelle_edram", "aerp_sram", "speedup", +1),
    ("kelle_edram", "aerp_sram", "efficiency", +1),
]


def ratio(point, s, over, figure):
    a, b = point[s], point[over]
    return b[0] / a[0] if figure == "speedup" else a[1] / b[1]


def check_pairs(by, tol):
    out = []
    for s, over, figure, sense in PAIRS:
        pts = {k: ratio(p, s, over, figure) for k, p in by.items() if s in p and over in p}
        ok = (lambda r: r > 1 + tol) if sense > 0 else (lambda r: r < 1 - tol)
        bad = sorted(k for k, r in pts.items() if not ok(r))
        g = geomean(list(pts.values()))
        verdict = "holds" if pts and not bad else "mean only" if pts and ok(g) else "fails"
        word = "better" if sense > 0 else "worse"
        out.append((f"{NAMES[s]} {word} than {NAMES[over]} ({figure})", len(pts), g, verdict,
                    [(f"{m} {t}", pts[(m, t)]) for m, t in bad]))
    return out


def check_growth(by, tol):
    """Kelle+eDRAM's speedup over Original+SRAM grows with the decode length: per model across
    the tasks in order of decode length, and for the geometric mean per task."""
    per_task = defaultdict(list)
    bad = []
    models = sorted({m for m, _ in by})
    for m in models:
        seq = []
        for t in TASKS:
            p = by.get((m, t), {})
            if "kelle_edram" in p and "original_sram" in p:
                r = ratio(p, "kelle_edram", "original_sram", "speedup")
                seq.append((t, r))
                per_task[t].append(r)
        for (t0, r0), (t1, r1) in zip(seq, seq[1:]):
            if r1 < r0 * (1 - tol):
                bad.append((f"{m} {t0} -> {t1}", r1 / r0))
    means = [(t, geomean(per_task[t])) for t in TASKS if per_task[t]]
    mono = all(b >= a * (1 - tol) for (_, a), (_, b) in zip(means, means[1:]))
    verdict = "holds" if means and mono and not bad else "mean only" if means and mono else "fails"
    name = "Kelle+eDRAM's speedup over Original+SRAM grows with decode length (" + \
        ", ".join(f"{t} {g:.2f}x" for t, g in means) + ")"
    return (name, sum(len(v) for v in per_task.values()), float("nan"), verdict, bad)


def check_best(by, tol):
    """Kelle+eDRAM is the fastest and the most energy-efficient of the five at every point."""
    out = []
    for figure in ("speedup", "efficiency"):
        bad, n = [], 0
        for (m, t), p in sorted(by.items()):
            if "kelle_edram" not in p or len(p) < 2:
                continue
            n += 1
            for s in p:
                if s != "kelle_edram" and ratio(p, "kelle_edram", s, figure) <= 1 + tol:
                    bad.append((f"{m} {t} vs {NAMES.get(s, s)}", ratio(p, "kelle_edram", s, figure)))
        out.append((f"Kelle+eDRAM the best of the systems at every point ({figure})", n, float("nan"),
                    "holds" if n and not bad else "fails", bad))
    return out


@entry("check-orderings")
def main(argv):
    ap = parser("check-orderings", __doc__)
    ap.add_argument("csv")
    ap.add_argument("--tolerance", type=float, default=0.5, help="percent (default 0.5)")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    a = ap.parse_args(argv)
    by = cp.load(a.csv)
    tol = a.tolerance / 100
    rows = check_pairs(by, tol) + [check_growth(by, tol)] + check_best(by, tol)
    md = ["| ordering | points | mean | verdict | points where it does not hold |", "|---|---|---|---|---|"]
    failed = 0
    for name, n, g, verdict, bad in rows:
        failed += verdict == "fails"
        where = "; ".join(f"{k} {r:.3f}x" for k, r in bad[:8]) + (f"; and {len(bad) - 8} more" if len(bad) > 8 else "")
        mean = "" if math.isnan(g) else f"{g:.3f}x"
        print(f"{verdict:9s} {name}: {n} points{', mean ' + mean if mean else ''}"
              + (f"; not on {len(bad)}: {where}" if bad else ""))
        md.append(f"| {name} | {n} | {mean} | {verdict} | {where or '-'} |")
    print(f"check-orderings: {len(rows) - failed} of {len(rows)} orderings hold at least on the mean; {failed} fail")
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("\n".join(md) + "\n")
    return 1 if failed else 0

