"""Checks the main study's shortcuts against the fully detailed path (docs/studies.md,
"Sampling and its error").

For each point of the validation set, runs the scenario twice through kelle-vp:
  fast      the main study's settings (scenarios/studies/main.yaml): decode sampled every 256th
            step, sampled layers, the KV policy's exact bookkeeping for 1 sequence, 2 layers,
            4 heads;
  detailed  every decode step and every layer simulated, exact bookkeeping for every sequence,
            layer and head;
and compares every reported figure (scripts/compare-results: latency, throughput, energy in total
and by component, DRAM traffic by kind, refresh, KV figures, activation lifetimes). Prints a table
of the largest difference per point and writes a JSON file.

The points are shortened where the detailed run would take hours: batch 4 instead of 16 and
300 decode steps (the study's 256-step sampling then simulates steps 0, 1, 2, 4, ..., 128, 256
and 299 and extrapolates the 289 others, over spans of up to 127 steps), the task's context, KV
budget and window otherwise.

  scripts/validate-sampling                      the set (11 points), 2 at a time
  scripts/validate-sampling --quick              3 points, 130 decode steps, sampling every 64th
  scripts/validate-sampling --out FILE.json --workers 1 --tolerance 1
Exit status 1 when a figure differs by more than the tolerance (percent, default 1).
Python 3 standard library only.
"""

import concurrent.futures
import json
import os
import tempfile
import time

from . import ROOT
from .cli import add_kelle_vp, checked_run, entry, kelle_vp, parser, run_argv

# system, model, task: both attention kinds (multi-head: Llama2, OPT; grouped-query: the
# others), every task, every system.
POINTS = [
    ("kelle_edram", "llama2-7b", "triviaqa"),
    ("kelle_edram", "llama3-8b", "pg19"),
    ("kelle_edram", "opt-6.7b", "lambada"),
    ("aerp_sram", "llama2-13b", "qasper"),
    ("aerp_sram", "llama3.2-3b", "triviaqa"),
    ("aep_sram", "mistral-7b", "pg19"),
    ("aep_sram", "llama2-7b", "lambada"),
    ("original_edram", "qwen2-7b", "triviaqa"),
    ("original_edram", "llama3.2-3b", "qasper"),
    ("original_sram", "llama2-7b", "pg19"),
    ("original_sram", "opt-6.7b", "triviaqa"),
]
QUICK = [("kelle_edram", "llama2-7b", "lambada"), ("aep_sram", "llama3.2-3b", "triviaqa"),
         ("original_sram", "opt-6.7b", "lambada")]

# The main study's shortcuts (scenarios/studies/main.yaml) and their detailed counterparts.
FAST = ["-p", "workload.sample_every=256", "-p", "workload.sample_layers=true",
        "-p", "policy.exact_sequences=1", "-p", "policy.exact_layers=2", "-p", "policy.exact_heads=4"]
DETAILED = ["-p", "workload.sample_every=1", "-p", "workload.sample_layers=false",
            "-p", "policy.exact_sequences=0", "-p", "policy.exact_layers=0", "-p", "policy.exact_heads=0"]
COMMON = ["-p", "workload.placement.allow_dram_overflow=true", "-p", "sim.time_limit_s=100000000"]


def run(binary, point, extra, folder):
    system, model, task = point
    t0 = time.perf_counter()
    res = checked_run(run_argv(binary, os.path.join(ROOT, "scenarios", "studies", "llm.yaml"), folder,
                               {"system": system, "workload.model": model, "workload.task": task}, quiet=True) + extra,
                      folder)
    return res, time.perf_counter() - t0


@entry("validate-sampling")
def main(argv):
    ap = parser("validate-sampling", __doc__)
    add_kelle_vp(ap)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tolerance", type=float, default=1.0)
    ap.add_argument("--out", help="JSON file of the errors (default: none)")
    args = ap.parse_args(argv)
    args.binary = kelle_vp(args.kelle_vp)
    from . import compare_results as cmp
    points = QUICK if args.quick else POINTS
    batch, decode = ("2", "130") if args.quick else ("4", "300")
    shape = ["-p", f"workload.batch={batch}", "-p", f"workload.decode_len={decode}"]
    fast = FAST if not args.quick else [a.replace("sample_every=256", "sample_every=64") for a in FAST]
    tmp = tempfile.mkdtemp(prefix="kelle-validate-")

    def one(i_point):
        i, point = i_point
        a, wa = run(args.binary, point, COMMON + shape + DETAILED, os.path.join(tmp, f"{i}-detailed"))
        b, wb = run(args.binary, point, COMMON + shape + fast, os.path.join(tmp, f"{i}-fast"))
        rows, worst = cmp.compare(a, b, args.tolerance)
        return {"system": point[0], "model": point[1], "task": point[2], "batch": int(batch),
                "decode_len": int(decode), "largest_difference_pct": worst[1], "figure": worst[0],
                "beyond_tolerance": [{"figure": k, "detailed": va, "fast": vb, "difference_pct": d}
                                     for k, va, vb, d in rows],
                "wall_s_detailed": wa, "wall_s_fast": wb}

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.workers)) as ex:
        results = list(ex.map(one, enumerate(points)))
    print(f"{'system':15s} {'model':12s} {'task':9s} {'largest diff':>12s}  {'figure':52s} "
          f"{'wall detailed':>13s} {'wall fast':>9s}")
    bad = 0
    for r in results:
        bad += len(r["beyond_tolerance"])
        print(f"{r['system']:15s} {r['model']:12s} {r['task']:9s} {r['largest_difference_pct']:+11.3f}%  "
              f"{r['figure'][:52]:52s} {r['wall_s_detailed']:12.1f}s {r['wall_s_fast']:8.1f}s")
    worst = max(results, key=lambda r: abs(r["largest_difference_pct"]))
    print(f"validation: {len(results)} points, largest difference {worst['largest_difference_pct']:+.3f} % "
          f"({worst['system']} {worst['model']} {worst['task']}: {worst['figure']}); "
          f"{bad} figure(s) beyond {args.tolerance} %")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"tolerance_pct": args.tolerance, "points": results}, f, indent=1)
    return 1 if bad else 0

