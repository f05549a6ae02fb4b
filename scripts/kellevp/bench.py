"""Simulation-speed benchmark of Kelle VP (docs/benchmark.md).

Runs a fixed set of scenarios through kelle-vp (each with -o into a temporary folder) and the
bare SystemC ping-pong (kelle-pingpong), prints a table and writes a JSON file.

  scripts/bench                       # full set, 3 repeats (about a minute on 2 cores)
  scripts/bench --quick               # shorter scenarios, 1 repeat (a few seconds)
  scripts/bench --compare bench/results/bench-OLD.json
  scripts/bench --kelle-vp build-x/kelle-vp --out /tmp/b.json
  scripts/bench --estimate            # only the first-order estimate's designs per second

Per scenario: wall time of the process, wall time of the simulation loop (results.json
wall_time_s), simulated time, peak resident memory, TLM transactions (sum over the
interconnect's initiator ports), transactions per wall second of the simulation loop, decode
steps per wall second, and the transactions per second as a fraction of the ping-pong's.
Python 3 standard library only.
"""

import argparse
import datetime
import json
import os
import platform as pyplatform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from . import ROOT
from .cli import Parser, add_kelle_vp, entry, fail, kelle_vp

# The full cache and no refresh policy on every system (the platform's speed, comparable across
# commits; kelle_edram's own firmware would add the policies' bookkeeping).
DECODE_B16 = ["-p", "workload.skip_prefill=true", "-p", "workload.batch=16",
              "-p", "workload.context_len=512", "-p", "policy.kv=full", "-p", "policy.refresh=none"]

# The main study's shortcuts (scenarios/studies/main.yaml; checked by scripts/validate-sampling).
TASK_FAST = ["-p", "workload.sample_every=256", "-p", "workload.sample_layers=true",
             "-p", "policy.exact_sequences=1", "-p", "policy.exact_layers=2", "-p", "policy.exact_heads=4",
             "-p", "workload.placement.allow_dram_overflow=true", "-p", "sim.time_limit_s=100000000"]

# Sampled decode against the detailed path: the same run with every step simulated and with
# SAMPLING_K; the largest difference over the reported figures (scripts/compare-results).
SAMPLING_RUN = ("scenarios/default.yaml", ["-p", "workload.batch=4", "-p", "workload.context_len=128",
                                           "-p", "workload.decode_len=64"],
                ["-p", "workload.batch=2", "-p", "workload.context_len=32", "-p", "workload.decode_len=24"])
SAMPLING_K = 16

# name, scenario file, overrides (full run), overrides (--quick)
SCENARIOS = [
    ("default", "scenarios/default.yaml",
     [],
     ["-p", "workload.context_len=16", "-p", "workload.decode_len=1"]),
    ("llama2-7b-b16-decode-kelle_edram", "scenarios/default.yaml",
     ["-p", "system=kelle_edram"] + DECODE_B16 + ["-p", "workload.decode_len=4"],
     ["-p", "system=kelle_edram"] + DECODE_B16 + ["-p", "workload.decode_len=1"]),
    ("llama2-7b-b16-decode-original_sram", "scenarios/default.yaml",
     ["-p", "system=original_sram"] + DECODE_B16 + ["-p", "workload.decode_len=4"],
     ["-p", "system=original_sram"] + DECODE_B16 + ["-p", "workload.decode_len=1"]),
    # The scenario's own 16 MiB lasts 10 ms of wall time, too short to time; 4 GiB (1 Mi
    # transactions of 4 KiB) is the same stream, longer.
    ("dram_stream", "scenarios/microbench/dram_stream.yaml",
     ["-p", "workload.total_bytes=4294967296"],
     ["-p", "workload.total_bytes=268435456"]),
]
# --long adds the paper's long tasks (minutes each on 2 cores).
LONG_SCENARIOS = [
    # The paper's long tasks on Kelle+eDRAM (AERP, 2DRP), decode sampled (every 256th step in
    # detail) and the policy's exact bookkeeping on two sequences; --quick shortens the decode.
    # Original+SRAM cannot run them: a full cache of 16 sequences exceeds the 16 GB DRAM.
    ("llama2-7b-triviaqa-kelle_edram", "scenarios/studies/llm.yaml",
     ["-p", "workload.task=triviaqa"] + TASK_FAST,
     ["-p", "workload.task=triviaqa", "-p", "workload.decode_len=256"] + TASK_FAST),
    # PG19 at batch 16 (512 + 8192): the KV of N' = 2048 tokens per head (16 GiB) and the weights
    # (6.6 GB) exceed the 16 GB DRAM: the main study allows the overflow (placement.allow_dram_overflow).
    ("llama2-7b-pg19-kelle_edram", "scenarios/studies/llm.yaml",
     ["-p", "workload.task=pg19"] + TASK_FAST,
     ["-p", "workload.task=pg19", "-p", "workload.decode_len=512"] + TASK_FAST),
]
PINGPONG_TRANSACTIONS = {False: 2000000, True: 500000}

# The figures of a row, in table order: key, heading, format.
COLUMNS = [
    ("wall_s", "wall s", "{:.2f}"),
    ("run_wall_s", "loop s", "{:.2f}"),
    ("sim_time_s", "sim s", "{:.4g}"),
    ("peak_rss_MiB", "RSS MiB", "{:.1f}"),
    ("transactions", "transactions", "{:.0f}"),
    ("tps", "trans/s", "{:.4g}"),
    ("pingpong_ratio", "x ping-pong", "{:.3f}"),
    ("decode_steps_per_s", "decode steps/s", "{:.3g}"),
]


def gnu_time():
    """/usr/bin/time if it is GNU time (it understands -v), else None."""
    t = "/usr/bin/time"
    if not os.access(t, os.X_OK):
        return None
    try:
        r = subprocess.run([t, "-v", "true"], capture_output=True, text=True)
    except OSError:
        return None
    return t if "Maximum resident set size" in r.stderr else None


# Fallback for peak memory: a small Python parent per run whose RUSAGE_CHILDREN covers exactly
# that one child (RUSAGE_CHILDREN of this script would be the maximum over every run so far).
RUSAGE_WRAPPER = r"""
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(rc)
"""


class runner:
    def __init__(self):
        self.time = gnu_time()
        self.rss_method = ("/usr/bin/time -v (Maximum resident set size)" if self.time else
                           "resource.getrusage(RUSAGE_CHILDREN).ru_maxrss of a wrapper process")

    def run(self, cmd, tmp):
        """Runs cmd; returns (stdout, stderr, wall seconds, peak RSS in KiB)."""
        rss_file = os.path.join(tmp, "rss.txt")
        if self.time:
            full = [self.time, "-v", "-o", rss_file] + cmd
        else:
            full = [sys.executable, "-c", RUSAGE_WRAPPER, rss_file] + cmd
        t0 = time.perf_counter()
        r = subprocess.run(full, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            fail("{} exited with {}:\n{}".format(" ".join(cmd), r.returncode, r.stderr[-2000:]))
        with open(rss_file) as f:
            text = f.read()
        if self.time:
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
            if not m:
                fail("no peak memory in the output of /usr/bin/time -v")
            rss_kib = int(m.group(1))
        else:
            rss_kib = int(text.strip())  # Linux: kilobytes
        return r.stdout, r.stderr, wall, rss_kib


def transactions(results):
    """TLM transactions of a run: the sum of the interconnect's transactions_from_<initiator>
    statistics (every transaction enters through one initiator port and leaves through one
    target port, so this also equals the sum of transactions_to_<target>)."""
    stats = results["stats"]["interconnect"]
    return sum(s["value"] for key, s in stats.items() if key.startswith("transactions_from_"))


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_kib = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu or pyplatform.processor(),
            "mem_GiB": round(mem_kib / 1048576, 1), "os": pyplatform.platform(),
            "python": pyplatform.python_version()}


def median_row(runs, keys):
    row = dict(runs[0])
    for k in keys:
        vals = [r[k] for r in runs if r.get(k) is not None]
        row[k] = statistics.median(vals) if vals else None
    row["peak_rss_MiB"] = max(r["peak_rss_MiB"] for r in runs)
    if len(runs) > 1:
        row["wall_s_runs"] = [round(r["wall_s"], 4) for r in runs]
        row["tps_runs"] = [round(r["tps"], 1) for r in runs]
    return row


def run_pingpong(rn, binary, n, repeat, tmp):
    runs = []
    for _ in range(repeat):
        out, _, wall, rss = rn.run([binary, "--transactions", str(n), "--bytes", "64"], tmp)
        j = json.loads(out.strip().splitlines()[-1])
        runs.append({"name": "pingpong", "command": [binary, "--transactions", str(n), "--bytes", "64"],
                     "wall_s": wall, "run_wall_s": j["wall_s"], "sim_time_s": j["sim_time_s"],
                     "peak_rss_MiB": rss / 1024, "transactions": j["transactions"], "tps": j["tps"],
                     "pingpong_ratio": 1.0, "decode_steps": None, "decode_steps_per_s": None})
    return median_row(runs, ["wall_s", "run_wall_s", "tps"])


def run_scenario(rn, binary, name, scenario, overrides, repeat, tmp):
    runs = []
    for i in range(repeat):
        outdir = os.path.join(tmp, "{}-{}".format(name, i))
        cmd = [binary, "run", os.path.join(ROOT, scenario), "-q"] + overrides + ["-o", outdir]
        _, _, wall, rss = rn.run(cmd, tmp)
        with open(os.path.join(outdir, "results.json")) as f:
            res = json.load(f)
        n = transactions(res)
        loop = res["wall_time_s"]
        row = {"name": name, "command": ["kelle-vp", "run", scenario] + overrides,
               "wall_s": wall, "run_wall_s": loop, "peak_rss_MiB": rss / 1024, "sim_time_s": res["sim_time_s"],
               "transactions": n, "tps": n / loop if loop > 0 else None,
               "decode_steps": None, "decode_steps_per_s": None}
        llm = res.get("llm")
        if llm is not None:
            steps = llm["decode_len"]
            row["decode_steps"] = steps
            row["decode_tokens"] = steps * llm["batch"]
            row["decode_sim_s"] = res["latency_s"]["decode"]
            row["prefill_sim_s"] = res["latency_s"]["prefill"]
            row["decode_steps_per_s"] = steps / loop if loop > 0 else None
        row["kelle_vp_version"] = res.get("kelle_vp_version")
        runs.append(row)
    return runs


def run_sampling_check(binary, quick, tmp):
    from . import compare_results as cmp
    scenario, full, short = SAMPLING_RUN
    res, walls = [], []
    for k in (1, SAMPLING_K):
        outdir = os.path.join(tmp, "sampling-{}".format(k))
        cmd = [binary, "run", os.path.join(ROOT, scenario), "-q"] + (short if quick else full) + \
              ["-p", "workload.sample_every={}".format(k), "-o", outdir]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
        with open(os.path.join(outdir, "results.json")) as f:
            res.append(json.load(f))
    _, worst = cmp.compare(res[0], res[1], 1.0)
    return {"k": SAMPLING_K, "command": ["kelle-vp", "run", scenario] + (short if quick else full),
            "largest_difference_pct": worst[1], "figure": worst[0],
            "wall_detailed_s": walls[0], "wall_sampled_s": walls[1]}


# The first-order estimate (kelle-vp estimate, docs/explore.md): designs per second on one core,
# the designs a search screens (the array, the on-chip memories, the refresh policy varied) on
# the main comparison's workloads.
ESTIMATE_DESIGNS = {False: 4000, True: 500}


def run_estimate(binary, quick):
    import itertools
    import random
    rng = random.Random(1)
    space = list(itertools.product([16, 24, 32, 48, 64], [0.5, 1, 2, 4], [1, 2, 4, 8], ["2drp", "uniform"],
                                   ["llama2-7b", "llama3.2-3b"], ["triviaqa", "pg19"]))
    lines = []
    for _ in range(ESTIMATE_DESIGNS[quick]):
        r, w, kv, ref, model, task = rng.choice(space)
        lines.append(json.dumps({"system.compute.rsa.rows": r, "system.compute.rsa.cols": r,
                                 "system.memories.weight_sram.capacity_MiB": w,
                                 "system.memories.kv_edram.capacity_MiB": kv, "policy.refresh": ref,
                                 "workload.model": model, "workload.task": task}))
    cmd = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    cmd += [binary, "estimate", os.path.join(ROOT, "scenarios", "studies", "llm.yaml"), "--designs", "-"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, input="\n".join(lines) + "\n", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        fail("kelle-vp estimate: " + (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])
    refused = sum(1 for l in r.stdout.splitlines() if '"error"' in l)
    return {"designs": len(lines), "refused": refused, "wall_s": round(wall, 3),
            "designs_per_s": round(len(lines) / wall, 1)}


def print_table(rows):
    heads = ["scenario"] + [c[1] for c in COLUMNS]
    cells = []
    for r in rows:
        line = [r["name"]]
        for key, _, f in COLUMNS:
            v = r.get(key)
            line.append("-" if v is None else f.format(v))
        cells.append(line)
    widths = [max(len(x[i]) for x in [heads] + cells) for i in range(len(heads))]
    for line in [heads] + cells:
        print("  ".join([line[0].ljust(widths[0])] +
                        [line[i].rjust(widths[i]) for i in range(1, len(line))]))


def compare(old_path, new):
    with open(old_path) as f:
        old = json.load(f)
    old_rows = {r["name"]: r for r in [old["pingpong"]] + old["scenarios"]}
    print("\nChange against {} ({}):".format(old_path, old.get("created", "?")))
    if old.get("quick") != new.get("quick"):
        print("  (note: one run is --quick and the other is not; the figures are not comparable)")
    for r in [new["pingpong"]] + new["scenarios"]:
        o = old_rows.get(r["name"])
        if o is None:
            print("  {}: not in the old run".format(r["name"]))
            continue
        parts = []
        for key, head, f in COLUMNS:
            a, b = o.get(key), r.get(key)
            if a is None or b is None:
                continue
            ch = "{:+.1f} %".format(100.0 * (b - a) / a) if a else "n/a"
            parts.append("{} {} -> {} ({})".format(head, f.format(a), f.format(b), ch))
        print("  {}:\n    ".format(r["name"]) + "\n    ".join(parts))
    for name in old_rows:
        if name not in {r["name"] for r in new["scenarios"]} | {"pingpong"}:
            print("  {}: only in the old run".format(name))


def run_validation(binary, quick, tmp):
    """The main study's shortcuts against the detailed path (scripts/validate-sampling): the
    largest difference per point over every reported figure."""
    out = os.path.join(tmp, "validation.json")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "validate-sampling"), "--kelle-vp", binary, "--out", out]
    if quick:
        cmd.append("--quick")
    print("validation set (scripts/validate-sampling{}):".format(" --quick" if quick else ""), flush=True)
    subprocess.run(cmd)
    try:
        with open(out) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


@entry("bench")
def main(argv):
    ap = Parser(prog="bench", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_kelle_vp(ap)
    ap.add_argument("--pingpong", default=None,
                    help="kelle-pingpong (default: beside --kelle-vp)")
    ap.add_argument("--out", default=None,
                    help="JSON file to write (default: bench/results/bench-<timestamp>.json)")
    ap.add_argument("--quick", action="store_true", help="shorter scenarios, one repeat")
    ap.add_argument("--long", action="store_true", help="add the paper's long tasks (TriviaQA and PG19 at batch 16) and the main study's validation set (scripts/validate-sampling)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs of each scenario, the median is kept (default 3, --quick 1)")
    ap.add_argument("--compare", metavar="OLD.json", help="print the change of each figure")
    ap.add_argument("--estimate", action="store_true",
                    help="only the first-order estimate's designs per second (kelle-vp estimate)")
    a = ap.parse_args(argv)

    binary = kelle_vp(a.kelle_vp)
    if a.estimate:
        est = run_estimate(binary, a.quick)
        print("first-order estimate (kelle-vp estimate, one core): {} designs in {:.2f} s: {:.0f} designs/s "
              "({} refused by the scenario's rules)".format(est["designs"], est["wall_s"], est["designs_per_s"],
                                                          est["refused"]))
        return
    pingpong = os.path.abspath(a.pingpong or os.path.join(os.path.dirname(binary), "kelle-pingpong"))
    for b in (binary, pingpong):
        if not os.access(b, os.X_OK):
            fail("{} not found; build it: cmake --build build -j2 (targets kelle-vp, "
                 "kelle-pingpong)".format(b))
    repeat = a.repeat or (1 if a.quick else 3)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = a.out or os.path.join(ROOT, "bench", "results", "bench-{}.json".format(stamp))

    rn = runner()
    m = machine()
    print("Kelle VP simulation-speed benchmark{}: {} CPUs, {}, {} GiB; {} repeat(s), median kept"
          .format(" (--quick)" if a.quick else "", m["nproc"], m["cpu"], m["mem_GiB"], repeat))
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kelle-bench-") as tmp:
        pp = run_pingpong(rn, pingpong, PINGPONG_TRANSACTIONS[a.quick], repeat, tmp)
        rows = []
        for name, scenario, full, quick in SCENARIOS + (LONG_SCENARIOS if a.long else []):
            runs = run_scenario(rn, binary, name, scenario, quick if a.quick else full, repeat, tmp)
            rows.append((name, runs))
        sampling = run_sampling_check(binary, a.quick, tmp)
        est = run_estimate(binary, a.quick)
        validation = run_validation(binary, a.quick, tmp) if a.long else None
    scenarios = []
    for name, runs in rows:
        scenarios.append(median_row(runs, ["wall_s", "run_wall_s", "tps", "decode_steps_per_s"]))
    for r in scenarios:
        r["pingpong_ratio"] = r["tps"] / pp["tps"] if r["tps"] and pp["tps"] else None

    result = {
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": m,
        "binary": binary,
        "pingpong_binary": pingpong,
        "quick": a.quick,
        "repeat": repeat,
        "bench_wall_s": round(time.perf_counter() - t_start, 2),
        "methods": {
            "wall_s": "wall time of the whole process (start-up, elaboration, simulation, writing results), measured by this script",
            "run_wall_s": "wall time of the simulation loop (sc_start): results.json wall_time_s; the ping-pong times its sc_start the same way",
            "peak_rss": rn.rss_method,
            "transactions": "sum of the interconnect's transactions_from_<initiator> statistics",
            "tps": "transactions / run_wall_s",
            "decode_steps_per_s": "llm.decode_len / run_wall_s (the whole run's loop time: includes the prefill where one is simulated)",
            "pingpong_ratio": "tps / the ping-pong's tps in the same benchmark run",
            "aggregation": "median over repeats of the times and rates; maximum of the peak memory",
        },
        "pingpong": pp,
        "scenarios": scenarios,
        "sampled_decode": sampling,
        "estimate": est,
        "validation": validation,
    }
    print()
    print_table([pp] + scenarios)
    print("\nsampled decode (every {}th step) against every step simulated: largest difference {:+.3f} % "
          "({}), wall {:.1f} s against {:.1f} s".format(sampling["k"], sampling["largest_difference_pct"],
                                                      sampling["figure"], sampling["wall_sampled_s"],
                                                      sampling["wall_detailed_s"]))
    print("\nfirst-order estimate (kelle-vp estimate, one core): {} designs in {:.2f} s: {:.0f} designs/s "
          "({} refused by the scenario's rules)".format(est["designs"], est["wall_s"], est["designs_per_s"],
                                                      est["refused"]))
    print("\nbenchmark wall time {:.1f} s".format(result["bench_wall_s"]))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print("written to " + out)
    if a.compare:
        compare(a.compare, result)

