#!/usr/bin/env bash
# The quality path's orderings on the trained model, short (docs/quality.md): the sweep runs
# tests/studies/quality_orderings.yaml (the quality scenario at fewer tokens), the orderings check
# reads its results.csv, and the verdicts are the ones docs/quality.md reports for the full-length
# studies. Also: the full-cache reference's perplexity is every run's, the full policy's platform
# perplexity is within 1 % of it, and eviction at the smallest budget costs quality.
set -euo pipefail
vp=$1; src=$2; out=$3
rm -rf "$out"
"$src/scripts/sweep" "$src/tests/studies/quality_orderings.yaml" --workers 2 --out "$out" --kelle-vp "$vp"
set +e
"$src/scripts/check-quality-orderings" "$out/results.csv" --json > "$out/orderings.json"
rc=$?
set -e
cat "$out/orderings.json"
/usr/bin/python3 - "$out/results.csv" "$out/orderings.json" "$rc" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
v = json.load(open(sys.argv[2]))
rc = int(sys.argv[3])
full = {round(float(r["quality.full_cache.perplexity"]), 6) for r in rows}
assert len(full) == 1, f"every run has the same full-cache reference: {full}"
ref = full.pop()
f = [r for r in rows if r["llm.kv_policy"] == "full"][0]
assert abs(float(f["quality.perplexity"]) / ref - 1) < 0.01, (f["quality.perplexity"], ref)
assert float(f["quality.full_cache.kl_divergence"]) < 1e-4, f["quality.full_cache.kl_divergence"]
ev = [r for r in rows if r["llm.kv_policy"] == "h2o" and int(r["policy.kv_budget"]) == 16][0]
assert float(ev["quality.perplexity"]) > 1.01 * ref and float(ev["quality.full_cache.eviction_kl_divergence"]) > 1e-3, ev
EXPECT = {EXPECTED}
got = {k: d["verdict"] for k, d in v.items()}
assert got == EXPECT, f"verdicts {got}, expected {EXPECT}"
assert rc == (1 if "fails" in EXPECT.values() else 0), rc
print("quality orderings as documented:", got)
PY
