"""What-if runs behind the main comparison's deviations from the paper (docs/studies.md,
"Deviations from the paper"): each cause the doc names changed alone in one run of a point
(Llama2-7B on TriviaQA and on PG19 at batch 16 by default, the main study's settings), then all of
them together, and the ratio each moves beside the study's and the paper's; the paper's batch
trend (its Table 9: Kelle+eDRAM over Original+SRAM at batch 1, 4 and 16) as in the study, under
the paper's numbers and with every cause together; with --whole, the whole main comparison
(140 points) under the paper's numbers and with every cause together, its five claims beside the
paper's. The batch-1 PG19 runs are the longest: 60 min in all on the shared 2-core machine while
other builds loaded it (2026-12-07); --whole adds two sweeps of the main study (about 12 minutes
each on 2 idle cores).

Usage: scripts/what-if-main [--model M] [--tasks T,T] [--batches B,B,B] [--workers N]
                            [--whole] [--results DIR] [--out FILE.md] [--kelle-vp PATH]

Causes and what the run changes (the paper's value of the ratio in the last column):
  the 24 x 24 array          Original+SRAM with Kelle's 32 x 32 array: at batch 16 a fold of the
                             24 x 24 array takes its 576 B of weights in 16 cycles (36 GB/s),
                             below the DRAM's 57 GB/s, so the SRAM systems' projections are
                             bound by the array and their attention by the DRAM
  the Kelle scheduler        Original+SRAM run by the Kelle scheduler: the scheduler's share
  on-chip access energy      tech.sram and tech.edram access energy / 10 on both systems: the
                             weights' two passes through the on-chip arrays at Table 1's energy
  eDRAM refresh energy       tech.edram.refresh_energy_mJ_per_pass = 0 on the eDRAM system: the
                             refresh share of its energy (timing unchanged)
  the paper's DRAM energy    scenarios/tech/paper-implied.yaml on both systems: the paper's
                             11.74 W at 64 GB/s, 22.93 pJ per bit moved (the default LPDDR4:
                             8.47 read, 5.03 written, plus activations, background and refresh)
  recomputation              AERP's popular tokens all stored as x (policy.recompute=all) on
                             AERP+SRAM and Kelle+eDRAM: the cost the firmware's budget avoids
  every cause together       on every system: the paper's DRAM energy, no eDRAM refresh energy,
                             on-chip access energy / 10, the 32 x 32 array and the Kelle
                             scheduler (recomputation stays the firmware's budget: storing every
                             popular token as x only slows every system down)
Python 3 with python3-yaml (scripts/setup-deps); needs build/kelle-vp.
"""
import concurrent.futures
import os
import tempfile

from . import ROOT
from .sweep import load_study
from .compare_paper import CLAIMS, NAMES, load as load_results, table as claims_table
from .cli import add_kelle_vp, checked_run, entry, fail, kelle_vp, parser, run_argv

PAPER_IMPLIED = os.path.join(ROOT, "scenarios", "tech", "paper-implied.yaml")
MAIN_STUDY = os.path.join(ROOT, "scenarios", "studies", "main.yaml")
STUDY_CSV = os.path.join(ROOT, "docs", "figures", "main_results.csv")


def study_settings():
    """The main study's overrides (scenarios/studies/main.yaml), as (key, value) pairs."""
    overrides = load_study(MAIN_STUDY)[2]
    return [(k, v) for k, v in overrides.items()]


# A change is a list of overrides ("key=value") and overlay files ("@FILE").
ONCHIP_CHEAP = ["tech.sram.access_energy_pJ_per_byte=18.59", "tech.edram.access_energy_pJ_per_byte=8.48"]
NO_REFRESH_ENERGY = ["tech.edram.refresh_energy_mJ_per_pass=0"]
ARRAY_32 = ["system.compute.rsa.rows=32", "system.compute.rsa.cols=32"]
KELLE_SCHEDULER = ["scheduler=kelle"]
PAPER_DRAM = ["@" + PAPER_IMPLIED]
# Every cause together, on every system alike (Kelle+eDRAM has the array and scheduler already).
TOGETHER = PAPER_DRAM + NO_REFRESH_ENERGY + ONCHIP_CHEAP + ARRAY_32 + KELLE_SCHEDULER
TOGETHER_NAME = "every cause together"
# (cause, system, over, change on system, change on over, the ratio's paper value)
CASES = [
    ("as in the study", "kelle_edram", "original_sram", [], [], (3.94, 4.46)),
    ("Original+SRAM with a 32 x 32 array", "kelle_edram", "original_sram", [], ARRAY_32, (3.94, 4.46)),
    ("Original+SRAM run by the Kelle scheduler", "kelle_edram", "original_sram", [], KELLE_SCHEDULER, (3.94, 4.46)),
    ("on-chip access energy / 10", "kelle_edram", "original_sram", ONCHIP_CHEAP, ONCHIP_CHEAP, (3.94, 4.46)),
    ("Kelle+eDRAM's refresh energy 0", "kelle_edram", "original_sram", NO_REFRESH_ENERGY, [], (3.94, 4.46)),
    ("the paper's DRAM energy (22.93 pJ/bit)", "kelle_edram", "original_sram", PAPER_DRAM, PAPER_DRAM, (3.94, 4.46)),
    (TOGETHER_NAME, "kelle_edram", "original_sram", TOGETHER, TOGETHER, (3.94, 4.46)),
    ("as in the study", "aep_sram", "original_sram", [], [], (2.39, 2.41)),
    ("both with a 32 x 32 array", "aep_sram", "original_sram", ARRAY_32, ARRAY_32, (2.39, 2.41)),
    ("the paper's DRAM energy (22.93 pJ/bit)", "aep_sram", "original_sram", PAPER_DRAM, PAPER_DRAM, (2.39, 2.41)),
    (TOGETHER_NAME, "aep_sram", "original_sram", TOGETHER, TOGETHER, (2.39, 2.41)),
    ("as in the study", "aerp_sram", "aep_sram", [], [], (1.19, 1.27)),
    ("recompute all popular tokens", "aerp_sram", "aep_sram", ["policy.recompute=all"], [], (1.19, 1.27)),
    ("the paper's DRAM energy (22.93 pJ/bit)", "aerp_sram", "aep_sram", PAPER_DRAM, PAPER_DRAM, (1.19, 1.27)),
    (TOGETHER_NAME, "aerp_sram", "aep_sram", TOGETHER, TOGETHER, (1.19, 1.27)),
    ("as in the study", "kelle_edram", "aerp_sram", [], [], (1.29, 1.45)),
    ("recompute all popular tokens", "kelle_edram", "aerp_sram", ["policy.recompute=all"], ["policy.recompute=all"],
     (1.29, 1.45)),
    ("the paper's DRAM energy (22.93 pJ/bit)", "kelle_edram", "aerp_sram", PAPER_DRAM, PAPER_DRAM, (1.29, 1.45)),
    (TOGETHER_NAME, "kelle_edram", "aerp_sram", TOGETHER, TOGETHER, (1.29, 1.45)),
    ("as in the study", "original_edram", "original_sram", [], [], (1.32, 0.61)),
    ("Original+eDRAM's refresh energy 0", "original_edram", "original_sram", NO_REFRESH_ENERGY, [], (1.32, 0.61)),
    ("the paper's DRAM energy (22.93 pJ/bit)", "original_edram", "original_sram", PAPER_DRAM, PAPER_DRAM, (1.32, 0.61)),
    (TOGETHER_NAME, "original_edram", "original_sram", TOGETHER, TOGETHER, (1.32, 0.61)),
]
# The paper's Table 9: Kelle+eDRAM's energy efficiency over Original+SRAM by batch size.
TABLE9 = {1: 1.71, 4: 2.23, 16: 6.67}
# The main study's batch (every task's default, spec section 5): the batch trend takes these
# points from the runs above instead of running them again.
STUDY_BATCH = 16
# (name, --whole's results folder, change)
SETTINGS = [("as in the study", None, []), ("the paper's DRAM energy", "paper-dram", PAPER_DRAM),
            (TOGETHER_NAME, "together", TOGETHER)]


def split(change):
    """A change as (overrides, overlay files)."""
    return [c for c in change if not c.startswith("@")], [c[1:] for c in change if c.startswith("@")]


def run(binary, system, model, task, change, folder, settings):
    overrides, overlays = split(change)
    j = checked_run(run_argv(binary, os.path.join(ROOT, "scenarios", "studies", "llm.yaml"), folder,
                             [("system", system), ("workload.model", model), ("workload.task", task)] +
                             settings + overrides, quiet=True, overlays=overlays), folder)
    return j["latency_s"]["total"], j["throughput"]["tokens_per_J"]


def ratio_cells(a, b):
    """(speedup, efficiency) of a over b, each given as (latency, tokens/J)."""
    return [f"{b[0] / a[0]:.2f}x", f"{a[1] / b[1]:.2f}x"]


def whole(binary, workers, results, change):
    """The main study's 140 points under a change: its results.csv (scripts/sweep)."""
    from .sweep import main as sweep
    overrides, overlays = split(change)
    argv = [MAIN_STUDY, "--out", results, "--workers", str(workers), "--kelle-vp", binary]
    for f in overlays:
        argv += ["--overlay", f]
    for o in overrides:
        argv += ["-p", o]
    if sweep(argv) != 0:
        fail(f"the main study under {results}", "some points failed (listed above)")
    return os.path.join(results, "results.csv")


@entry("what-if-main")
def main(argv):
    ap = parser("what-if-main", __doc__)
    add_kelle_vp(ap)
    ap.add_argument("--model", default="llama2-7b")
    ap.add_argument("--tasks", default="triviaqa,pg19")
    ap.add_argument("--batches", default="1,4,16", help="the batch trend's batch sizes (Table 9); '' for none")
    ap.add_argument("--batch-task", default="pg19", help="the batch trend's task (default pg19)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--whole", action="store_true",
                    help="also run the whole main study under the paper's DRAM energy and with every cause together")
    ap.add_argument("--results", default=os.path.join(ROOT, "results", "what-if-main"),
                    help="--whole's results folders (default results/what-if-main/)")
    ap.add_argument("--out", help="also write the tables as Markdown to this file")
    a = ap.parse_args(argv)
    a.binary = kelle_vp(a.kelle_vp)
    if a.workers < 1:
        fail("--workers", "expected a whole number >= 1")
    tasks = [t for t in a.tasks.split(",") if t]
    try:
        batches = [int(b) for b in a.batches.split(",") if b]
    except ValueError:
        fail("--batches", f"expected whole numbers separated by commas, got '{a.batches}'")
    if any(b < 1 for b in batches):
        fail("--batches", "expected batch sizes >= 1")
    tmp = tempfile.mkdtemp(prefix="kelle-whatif-")
    settings = study_settings()
    runs = {}  # (task, system, change, batch) -> (latency, tokens/J)
    for task in tasks:
        for _, s, over, xs, xo, _ in CASES:
            runs[(task, s, tuple(xs), None)] = None
            runs[(task, over, tuple(xo), None)] = None
    def batch_key(s, change, b):
        return (a.batch_task, s, tuple(change), None if b == STUDY_BATCH and a.batch_task in tasks else b)

    for b in batches:
        for _, _, change in SETTINGS:
            for s in ("kelle_edram", "original_sram"):
                runs[batch_key(s, change, b)] = None
    keys = list(runs)

    def one(i):
        task, s, change, batch = keys[i]
        extra = [] if batch is None else [("workload.batch", batch)]
        return run(a.binary, s, a.model, task, list(change), os.path.join(tmp, str(i)), settings + extra)

    with concurrent.futures.ThreadPoolExecutor(max_workers=a.workers) as ex:
        for k, v in zip(keys, ex.map(one, range(len(keys)))):
            runs[k] = v

    lines = [f"| {a.model} | what changes | ratio | " + " | ".join(f"{t}: speedup | efficiency" for t in tasks) +
             " | paper |", "|---|---|---|" + "---|---|" * len(tasks) + "---|"]
    for cause, s, over, xs, xo, paper in CASES:
        cells = []
        for task in tasks:
            cells += ratio_cells(runs[(task, s, tuple(xs), None)], runs[(task, over, tuple(xo), None)])
        lines.append(f"| | {cause} | {NAMES[s]} over {NAMES[over]} | " + " | ".join(cells) +
                     f" | {paper[0]:.2f}x / {paper[1]:.2f}x |")
    text = "\n".join(lines) + "\n"

    if batches:
        head = "| batch | " + " | ".join(f"{name}: speedup | efficiency" for name, _, _ in SETTINGS) + " | paper's Table 9: efficiency |"
        rows = [f"\nKelle+eDRAM over Original+SRAM by batch size ({a.model}, {a.batch_task}, the study's settings):\n",
                head, "|---|" + "---|---|" * len(SETTINGS) + "---|"]
        for b in batches:
            cells = []
            for _, _, change in SETTINGS:
                cells += ratio_cells(runs[batch_key("kelle_edram", change, b)], runs[batch_key("original_sram", change, b)])
            paper = f"{TABLE9[b]:.2f}x" if b in TABLE9 else "-"
            rows.append(f"| {b} | " + " | ".join(cells) + f" | {paper} |")
        text += "\n".join(rows) + "\n"

    print(text, end="", flush=True)  # before --whole's sweeps, which take long
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.whole:
        columns = [("as in the study", STUDY_CSV)]
        for name, folder, change in SETTINGS[1:]:
            columns.append((name, whole(a.binary, a.workers, os.path.join(a.results, folder), change)))
        tables = [claims_table(load_results(path)) for _, path in columns]
        rows = ["\nThe whole main comparison (geometric means over the 28 model x task points, speedup / "
                "efficiency):\n", "| claim | paper | " + " | ".join(n for n, _ in columns) + " |",
                "|---|---|" + "---|" * len(columns)]
        for i, (s, over, p_speed, p_eff) in enumerate(CLAIMS):
            cells = [f"{t[i][3]:.2f}x / {t[i][5]:.2f}x ({t[i][1]} points)" for t in tables]
            rows.append(f"| {NAMES[s]} vs {NAMES[over]} | {p_speed:.2f}x / {p_eff:.2f}x | " + " | ".join(cells) + " |")
        print("\n".join(rows))
        text += "\n".join(rows) + "\n"
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)
    return 0
