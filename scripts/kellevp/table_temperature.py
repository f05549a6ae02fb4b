"""Tables of the temperature studies (docs/models/thermal.md, "Studies"): one row per point of
results/temperature or results/temperature_pg19_rc (each point's results.json), with the energy,
the eDRAM refresh and its share, the efficiency against Original+SRAM at the same ambient
(Original+SRAM's energy / the system's: the same tokens), the expected failure rate, the refresh
intervals' temperature scale and the die's temperatures. Markdown on stdout.

Usage: scripts/table-temperature FOLDER      (a sweep's results folder: FOLDER/POINT/results.json)

A point without a `thermal` section or an ambient (a run without `thermal:`, a trace) is listed
under the technology's temperature, "-" for what it lacks. Python 3 standard library only.
"""
import math
import os

from .cli import entry, fail, parser
from .compare_results import read_results


def load(folder):
    if not os.path.isdir(folder):
        fail(folder, "no such folder (expected a sweep's results folder: scripts/sweep scenarios/studies/temperature.yaml)")
    rows = []
    for d in sorted(os.listdir(folder)):
        f = os.path.join(folder, d, "results.json")
        if not os.path.isfile(f):
            continue
        r = read_results(f)
        try:
            cfg = r["config"]
            pol = cfg.get("policy", {})
            tech_C = cfg.get("tech", {}).get("temperature_C", 105)
            ta = r.get("refresh", {}).get("temperature_aware") or {}
            e = r["energy_J"]
            comp = e.get("by_component", {})
            th = r.get("thermal", {})
            sysname = cfg["system"]["name"] if isinstance(cfg.get("system"), dict) else cfg.get("system")
            rows.append({
                "system": sysname,
                "aware": bool(pol.get("temperature_aware", False)),
                "ambient": th.get("ambient_C", tech_C if not th else None),
                "tech_C": tech_C,
                "total": e["total"],
                "edram_refresh": e.get("edram_refresh", 0.0),
                "dram_refresh": comp.get("dram.refresh", 0.0),
                "latency": r["sim_time_s"],
                "fail": r.get("refresh", {}).get("avg_failure_rate"),
                "scale": ta.get("interval_scale"),
                "max_C": th.get("max_C"), "mean_C": th.get("mean_C"),
                "dram_rate": r.get("stats", {}).get("dram", {}).get("refresh_rate", {}).get("value"),
            })
        except (KeyError, TypeError, AttributeError) as err:
            fail(f, f"not a run's results.json: missing {err} (expected config, energy_J.total and sim_time_s)")
    if not rows:
        fail(folder, "no POINT/results.json in it (run the sweep first)")
    return rows


def num(v, fmt):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


@entry("table-temperature")
def main(argv):
    ap = parser("table-temperature", __doc__)
    ap.add_argument("folder")
    a = ap.parse_args(argv)
    rows = load(a.folder)
    sram = {x["ambient"]: x["total"] for x in rows if x["system"] == "original_sram"}
    order = {"original_sram": 0, "original_edram": 1, "kelle_edram": 2}
    rows.sort(key=lambda x: (x["ambient"] is None, x["ambient"] or 0, order.get(x["system"], 9), x["aware"]))
    rc = any(x["max_C"] is not None and x["max_C"] != x["ambient"] for x in rows)
    head = ["ambient C", "system", "refresh", "energy J", "eDRAM refresh J", "refresh share",
            "x Original+SRAM", "avg failure rate", "interval scale", "latency s"]
    if rc:
        head += ["die max C", "die mean C", "DRAM refresh J", "DRAM rate at end"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for x in rows:
        refresh = ("none" if x["system"] == "original_sram"
                   else ("temperature-aware" if x["aware"] else f"fixed {x['tech_C']:g} C"))
        ratio = sram[x["ambient"]] / x["total"] if x["ambient"] in sram else None
        cells = [num(x["ambient"], "g"), str(x["system"]), refresh, num(x["total"], ".4g"), num(x["edram_refresh"], ".4g"),
                 f"{100 * x['edram_refresh'] / x['total']:.1f} %", num(ratio, ".3f"), num(x["fail"], ".3g"),
                 num(x["scale"], ".3g"), num(x["latency"], ".4g")]
        if rc:
            cells += [num(x["max_C"], ".1f"), num(x["mean_C"], ".1f"), num(x["dram_refresh"], ".4g"),
                      "-" if x["dram_rate"] is None else f"{x['dram_rate']:g}x"]
        print("| " + " | ".join(cells) + " |")
    return 0
