"""Compares two results.json files figure by figure.

Usage: scripts/compare-results A/results.json B/results.json [--tolerance PCT] [--all]

Prints every numeric figure of the reports (latency, throughput, traffic, energy, KV, refresh,
lifetimes; with --all also the per-module statistics) whose relative difference exceeds the
tolerance, and the largest difference. Exit status 1 when a reported figure differs by more
than the tolerance. The sampled-decode check of the benchmark uses it.
"""
import json
from .cli import entry, fail, flat, parser

# Top-level sections holding the figures a run reports (results.md).
REPORTED = ("latency_s", "throughput", "traffic_bytes", "energy_J", "energy_breakdown_J", "kv",
            "refresh", "activation_lifetimes")
IGNORED = ("config", "wall_time_s", "llm.sample_every", "llm.detailed_decode_steps", "llm.layers_extrapolated")


def compare(a, b, tolerance_pct, everything=False):
    """(rows, worst): rows are (key, a, b, diff %) beyond the tolerance."""
    fa, fb = flat(a), flat(b)
    rows, worst = [], ("", 0.0)
    for key, va in fa.items():
        if key not in fb or any(key == i or key.startswith(i + ".") for i in IGNORED):
            continue
        if not everything and not key.startswith(REPORTED):
            continue
        vb = fb[key]
        scale = max(abs(va), abs(vb))
        diff = 0.0 if scale == 0 else (vb - va) / scale * 100
        if abs(diff) > abs(worst[1]):
            worst = (key, diff)
        if abs(diff) > tolerance_pct:
            rows.append((key, va, vb, diff))
    return rows, worst


def read_results(path):
    """A results.json, or an InputError naming the file and what is wrong with it."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        fail(path, f"cannot read the file ({e.strerror or e})")
    except json.JSONDecodeError as e:
        fail(f"{path}:{e.lineno}", f"expected a results.json (JSON): {e.msg}")


@entry("compare-results")
def main(argv):
    ap = parser("compare-results", __doc__)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tolerance", type=float, default=1.0, help="percent (default 1)")
    ap.add_argument("--all", action="store_true", help="compare the per-module statistics too")
    args = ap.parse_args(argv)
    a, b = (read_results(p) for p in (args.a, args.b))
    rows, worst = compare(a, b, args.tolerance, args.all)
    for key, va, vb, d in rows:
        print(f"{key:60s} {va:12.5g} {vb:12.5g} {d:+8.2f} %")
    print(f"largest difference: {worst[1]:+.3f} % ({worst[0] or '-'}); "
          f"{len(rows)} figure(s) beyond {args.tolerance} %")
    return 1 if rows else 0

