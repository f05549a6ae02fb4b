"""What-if runs behind the main comparison's deviations from the paper (docs/studies.md, "The
whole main comparison, measured"): each cause the doc names is changed in one run of a point
(Llama2-7B on TriviaQA and on PG19 at batch 16 by default, the main study's settings), and the
ratio it moves is printed beside the study's. About 4 minutes on 2 cores.

Usage: scripts/what-if-main [--model M] [--tasks T,T] [--workers N] [--out FILE.md]

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
  recomputation              AERP's popular tokens all stored as x (policy.recompute=all) on
                             AERP+SRAM and Kelle+eDRAM: the cost the firmware's budget avoids
Python 3 with python3-yaml (scripts/setup-deps); needs build/kelle-vp.
"""
import concurrent.futures
import os
import tempfile


from . import ROOT
from .sweep import load_study
from .compare_paper import NAMES
from .cli import add_kelle_vp, checked_run, entry, kelle_vp, parser, run_argv


def study_settings():
    """The main study's overrides (scenarios/studies/main.yaml), as (key, value) pairs."""
    overrides = load_study(os.path.join(ROOT, "scenarios", "studies", "main.yaml"))[2]
    return [(k, v) for k, v in overrides.items()]


ONCHIP_CHEAP = ["tech.sram.access_energy_pJ_per_byte=18.59", "tech.edram.access_energy_pJ_per_byte=8.48"]
NO_REFRESH_ENERGY = ["tech.edram.refresh_energy_mJ_per_pass=0"]
ARRAY_32 = ["system.compute.rsa.rows=32", "system.compute.rsa.cols=32"]
# (cause, system, over, extra overrides on system, extra overrides on over, the ratio's paper value)
CASES = [
    ("as in the study", "kelle_edram", "original_sram", [], [], (3.94, 4.46)),
    ("Original+SRAM with a 32 x 32 array", "kelle_edram", "original_sram", [], ARRAY_32, (3.94, 4.46)),
    ("Original+SRAM run by the Kelle scheduler", "kelle_edram", "original_sram", [], ["scheduler=kelle"], (3.94, 4.46)),
    ("on-chip access energy / 10", "kelle_edram", "original_sram", ONCHIP_CHEAP, ONCHIP_CHEAP, (3.94, 4.46)),
    ("Kelle+eDRAM's refresh energy 0", "kelle_edram", "original_sram", NO_REFRESH_ENERGY, [], (3.94, 4.46)),
    ("as in the study", "aep_sram", "original_sram", [], [], (2.39, 2.41)),
    ("both with a 32 x 32 array", "aep_sram", "original_sram", ARRAY_32, ARRAY_32, (2.39, 2.41)),
    ("as in the study", "aerp_sram", "aep_sram", [], [], (1.19, 1.27)),
    ("recompute all popular tokens", "aerp_sram", "aep_sram", ["policy.recompute=all"], [], (1.19, 1.27)),
    ("as in the study", "kelle_edram", "aerp_sram", [], [], (1.29, 1.45)),
    ("recompute all popular tokens", "kelle_edram", "aerp_sram", ["policy.recompute=all"], ["policy.recompute=all"],
     (1.29, 1.45)),
    ("as in the study", "original_edram", "original_sram", [], [], (1.32, 0.61)),
    ("Original+eDRAM's refresh energy 0", "original_edram", "original_sram", NO_REFRESH_ENERGY, [], (1.32, 0.61)),
]
def run(binary, system, model, task, extra, folder):
    j = checked_run(run_argv(binary, os.path.join(ROOT, "scenarios", "studies", "llm.yaml"), folder,
                             [("system", system), ("workload.model", model), ("workload.task", task)] +
                             study_settings() + extra, quiet=True), folder)
    return j["latency_s"]["total"], j["throughput"]["tokens_per_J"]


@entry("what-if-main")
def main(argv):
    ap = parser("what-if-main", __doc__)
    add_kelle_vp(ap)
    ap.add_argument("--model", default="llama2-7b")
    ap.add_argument("--tasks", default="triviaqa,pg19")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", help="also write the table as Markdown to this file")
    a = ap.parse_args(argv)
    a.binary = kelle_vp(a.kelle_vp)
    tasks = [t for t in a.tasks.split(",") if t]
    tmp = tempfile.mkdtemp(prefix="kelle-whatif-")
    runs = {}
    for task in tasks:
        for _, s, over, xs, xo, _ in CASES:
            runs[(task, s, tuple(xs))] = None
            runs[(task, over, tuple(xo))] = None
    keys = list(runs)

    def one(i):
        task, s, extra = keys[i]
        return run(a.binary, s, a.model, task, list(extra), os.path.join(tmp, str(i)))

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.workers)) as ex:
        for k, v in zip(keys, ex.map(one, range(len(keys)))):
            runs[k] = v
    lines = [f"| {a.model} | what changes | ratio | " + " | ".join(f"{t}: speedup | efficiency" for t in tasks) +
             " | paper |", "|---|---|---|" + "---|---|" * len(tasks) + "---|"]
    for cause, s, over, xs, xo, paper in CASES:
        cells = []
        for task in tasks:
            ls, es = runs[(task, s, tuple(xs))]
            lo, eo = runs[(task, over, tuple(xo))]
            cells += [f"{lo / ls:.2f}x", f"{es / eo:.2f}x"]
        lines.append(f"| | {cause} | {NAMES[s]} over {NAMES[over]} | " + " | ".join(cells) +
                     f" | {paper[0]:.2f}x / {paper[1]:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0

