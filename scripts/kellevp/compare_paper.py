"""Puts the platform's main comparison beside the paper's claims (spec section 5).

Usage: scripts/compare-paper RESULTS.csv [--markdown FILE]

RESULTS.csv is what scripts/sweep wrote for the main study (or main_quick). For each claim the
ratio is computed per (model, task) point present in both systems and averaged geometrically;
the table gives the paper's number, the platform's and the deviation in percent. Latency
ratios are speedups (baseline latency / system latency); efficiency ratios are tokens per joule
(system / baseline). The Markdown file also holds the claims per task, the Figure 13 table
(every system over Original+SRAM at every point) and, where the CSV has them, the decode
steps' first-order estimates (roofline: simulated time over the bound, and what bounds it).
"""
import csv
from collections import defaultdict
from .cli import entry, fail, parser
from .stats import geomean

# (system, over, paper speedup, paper energy-efficiency ratio), spec section 5.
CLAIMS = [
    ("kelle_edram", "original_sram", 3.94, 4.46),
    ("original_edram", "original_sram", 1.32, 0.61),  # 39 % worse energy efficiency
    ("aep_sram", "original_sram", 2.39, 2.41),
    ("aerp_sram", "aep_sram", 1.19, 1.27),
    ("kelle_edram", "aerp_sram", 1.29, 1.45),
]
NAMES = {"original_sram": "Original+SRAM", "original_edram": "Original+eDRAM", "aep_sram": "AEP+SRAM",
         "aerp_sram": "AERP+SRAM", "kelle_edram": "Kelle+eDRAM"}


TASKS = ["lambada", "triviaqa", "qasper", "pg19"]  # in order of decode length
ORDER = ["original_sram", "original_edram", "aep_sram", "aerp_sram", "kelle_edram"]


def load(path, rows_out=None):
    by = defaultdict(dict)  # (model, task) -> system -> (latency, tokens/J)
    try:
        with open(path) as f:
            for row in csv.DictReader(f):
                key = (row.get("workload.model", "default"), row.get("workload.task", "default"))
                sys_name = row.get("system") or ""
                by[key][sys_name] = (float(row["latency_s.total"]), float(row["throughput.tokens_per_J"]))
                if rows_out is not None:
                    rows_out[(key, sys_name)] = row
    except (OSError, KeyError, ValueError) as e:
        fail(path, f"cannot read the main study's results ({e.strerror if isinstance(e, OSError) else repr(e)})")
    return by


def table(by):
    rows = []
    for s, over, p_speed, p_eff in CLAIMS:
        speed, eff = [], []
        for point in by.values():
            if s in point and over in point:
                speed.append(point[over][0] / point[s][0])
                eff.append(point[s][1] / point[over][1])
        n = len(speed)
        g_s, g_e = geomean(speed), geomean(eff)
        rows.append((f"{NAMES[s]} vs {NAMES[over]}", n, p_speed, g_s, p_eff, g_e))
    return rows


def markdown(rows):
    out = ["| claim | points | speedup: paper | platform | deviation | energy efficiency: paper | platform | deviation |",
           "|---|---|---|---|---|---|---|---|"]
    for name, n, ps, s, pe, e in rows:
        if n == 0:  # no (model, task) point where both systems ran
            out.append(f"| {name} | 0 | {ps:.2f}x | - | - | {pe:.2f}x | - | - |")
            continue
        out.append(f"| {name} | {n} | {ps:.2f}x | {s:.2f}x | {(s / ps - 1) * 100:+.0f} % | {pe:.2f}x | {e:.2f}x | "
                   f"{(e / pe - 1) * 100:+.0f} % |")
    return "\n".join(out) + "\n"


def per_task(by):
    """The claims' ratios per task (geometric mean over the models)."""
    tasks = [t for t in TASKS if any(k[1] == t for k in by)] + sorted({k[1] for k in by} - set(TASKS))
    out = ["| claim | " + " | ".join(f"{t}: speedup | efficiency" for t in tasks) + " |",
           "|---|" + "---|---|" * len(tasks)]
    for s, over, _, _ in CLAIMS:
        cells = []
        for t in tasks:
            pts = [p for k, p in by.items() if k[1] == t and s in p and over in p]
            if not pts:
                cells += ["-", "-"]
                continue
            cells.append(f"{geomean([p[over][0] / p[s][0] for p in pts]):.2f}x")
            cells.append(f"{geomean([p[s][1] / p[over][1] for p in pts]):.2f}x")
        out.append(f"| {NAMES[s]} vs {NAMES[over]} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def figure13(by, rows):
    """Every system over Original+SRAM at every point: speedup / energy efficiency, and the
    DRAM bytes the point needed beyond the 16 GB part (allow_dram_overflow)."""
    systems = [s for s in ORDER if any(s in p for p in by.values())]
    out = ["| model | task | " + " | ".join(NAMES[s] for s in systems) + " | beyond the DRAM |",
           "|---|---|" + "---|" * len(systems) + "---|"]
    for (m, t) in sorted(by, key=lambda k: (k[0], TASKS.index(k[1]) if k[1] in TASKS else 99)):
        p = by[(m, t)]
        if "original_sram" not in p:
            continue
        base = p["original_sram"]
        cells = [f"{base[0] / p[s][0]:.2f}x / {p[s][1] / base[1]:.2f}x" if s in p else "-" for s in systems]
        over = [NAMES[s] for s in systems
                if float(rows.get(((m, t), s), {}).get("llm.dram_overflow_bytes") or 0) > 0]
        out.append(f"| {m} | {t} | " + " | ".join(cells) + f" | {', '.join(over) or '-'} |")
    return "\n".join(out) + "\n"


def roofline_table(rows):
    """Per system and task: decode's simulated time over the first-order bound (geometric mean,
    range over the models), what bounds it, and the DRAM's achieved over sustainable bandwidth."""
    cells = defaultdict(list)
    for (key, s), row in rows.items():
        try:
            cells[(s, key[1])].append((float(row["roofline.decode.simulated_over_bound"]),
                                       row.get("roofline.decode.bottleneck", ""),
                                       float(row.get("roofline.decode.dram_achieved_GBps") or "nan") /
                                       float(row.get("roofline.decode.dram_sustainable_GBps") or "nan")))
        except (KeyError, ValueError, TypeError, ZeroDivisionError):
            continue
    if not cells:
        return ""
    tasks = [t for t in TASKS if any(k[1] == t for k in cells)]
    out = ["| system | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
    for s in ORDER:
        line = []
        for t in tasks:
            v = cells.get((s, t))
            if not v:
                line.append("-")
                continue
            r = [x[0] for x in v]
            bound = sorted({x[1] for x in v})
            dram = geomean([x[2] for x in v if x[2] == x[2] and x[2] > 0])
            line.append(f"{geomean(r):.2f}x ({min(r):.2f}-{max(r):.2f}; {'/'.join(bound)}; DRAM {dram * 100:.0f} %)")
        out.append(f"| {NAMES[s]} | " + " | ".join(line) + " |")
    return "\n".join(out) + "\n"


@entry("compare-paper")
def main(argv):
    ap = parser("compare-paper", __doc__)
    ap.add_argument("csv")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    args = ap.parse_args(argv)
    raw = {}
    by = load(args.csv, raw)
    rows = table(by)
    text = markdown(rows)
    print(text, end="")
    if args.markdown:
        roof = roofline_table(raw)
        with open(args.markdown, "w") as f:
            f.write("### The paper's claims\n\n" + text + "\n### Per task\n\n" + per_task(by) +
                    "\n### Every point (Figure 13): speedup / energy efficiency over Original+SRAM\n\n" +
                    figure13(by, raw) +
                    ("\n### Decode against its first-order estimate: simulated over bound (range; what bounds it; "
                     "DRAM achieved over sustainable)\n\n" + roof if roof else ""))
    return 0

