#!/usr/bin/env bash
# The quick main comparison end to end: the sweep runs the five systems, the comparison table and
# the plots are made, and the paper's orderings that the platform reproduces hold
# (docs/studies.md explains the one it does not: Kelle+eDRAM's energy efficiency).
set -euo pipefail
vp=$1; src=$2; out=$3
rm -rf "$out"
"$src/scripts/sweep" "$src/scenarios/studies/main_quick.yaml" --workers 2 --out "$out" --kelle-vp "$vp"
# A second sweep finds every result and runs nothing.
"$src/scripts/sweep" "$src/scenarios/studies/main_quick.yaml" --workers 2 --out "$out" --kelle-vp "$vp" | grep "5 already done, 0 to run" >/dev/null
"$src/scripts/compare-paper" "$out/results.csv" --markdown "$out/comparison.md" >/dev/null
grep -q "Kelle+eDRAM vs Original+SRAM" "$out/comparison.md"
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  "$src/scripts/plot-study" "$out/results.csv" >/dev/null
  test -s "$out/comparison.png" && test -s "$out/comparison.svg" && test -s "$out/kelle_energy.png"
fi
python3 - "$out/results.csv" <<'PY'
import csv, sys
r = {row["system"]: row for row in csv.DictReader(open(sys.argv[1]))}
lat = {s: float(v["latency_s.total"]) for s, v in r.items()}
eff = {s: float(v["throughput.tokens_per_J"]) for s, v in r.items()}
assert len(r) == 5, r.keys()
assert lat["aep_sram"] < lat["original_sram"] and eff["aep_sram"] > eff["original_sram"], "AEP+SRAM must beat Original+SRAM"
assert lat["original_edram"] < lat["original_sram"], "Original+eDRAM must be faster than Original+SRAM"
assert eff["original_edram"] < eff["original_sram"], "Original+eDRAM must be less efficient than Original+SRAM (refresh)"
kv = {s: float(v["traffic_bytes.dram_kv"]) for s, v in r.items()}
assert kv["aep_sram"] < kv["original_sram"], "AEP moves fewer KV bytes than the full cache"
# AERP's recomputation is simulated: the RSA's stacked rows do the MACs the policy decided.
import json, os
for s in ("aerp_sram", "kelle_edram"):
    res = json.load(open(os.path.join(os.path.dirname(sys.argv[1]), r[s]["scenario"], "results.json")))
    macs, rsa = res["kv"]["recompute_macs"], res["stats"]["rsa"]["recompute_macs"]["value"]
    assert macs > 0 and abs(rsa / macs - 1) < 0.05, (s, rsa, macs)  # sampled decode: extrapolated
# Not asserted (docs/studies.md says why): Kelle+eDRAM the fastest and the most efficient, and
# AERP faster than AEP. The stacked recomputation of every x token in every decode step costs
# more RSA time than the x format saves in memory traffic at these budgets.
print("orderings hold:", {s: (round(lat[s], 3), round(eff[s], 4)) for s in lat})
PY
