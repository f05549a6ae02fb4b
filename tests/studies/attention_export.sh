#!/usr/bin/env bash
# The trained model's attention as a trace (kelle-vp export-attention), its statistics
# (scripts/attention-stats) against the synthetic source's, and the trace replayed by a timing
# run with AERP on the same model shape. About 10 s.
set -euo pipefail
vp=$1; src=$2; out=$3
rm -rf "$out"
mkdir -p "$out"
t=$src/scenarios/functional/trained
"$vp" export-attention --model "$t/kjv-llama.safetensors" --text "$t/ruth.txt" --tokenizer "$t/tokenizer.bin" \
  --tokens 384 --sequences 2 -o "$out/ruth.katt"
for hs in 0 1; do
  "$vp" export-attention --synthetic --layers 4 --heads 4 -p head_sharing=$hs --tokens 384 --sequences 2 -o "$out/syn$hs.katt"
done
for f in ruth syn0 syn1; do "$src/scripts/attention-stats" "$out/$f.katt" --budget 64 --json > "$out/$f.json"; done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = {f: json.load(open(f"{sys.argv[1]}/{f}.json")) for f in ("ruth", "syn0", "syn1")}
r = d["ruth"]
assert (r["sequences"], r["layers"], r["heads"], r["tokens"]) == (2, 4, 4, 384), r
# The trained model's heads agree on their heavy hitters far more than independent heads would,
# and head_sharing spans independent (0) to identical (1) heads around it.
assert r["head_overlap_jaccard"] > 2 * r["head_overlap_if_independent"], r
assert d["syn0"]["head_overlap_jaccard"] < r["head_overlap_jaccard"] < d["syn1"]["head_overlap_jaccard"], d
for k in ("sink_mass", "recent_mass", "top10pct_mass"):
    assert 0 < r[k] < 1, (k, r)
print("attention export:", {k: round(v, 3) for k, v in r.items() if isinstance(v, float)})
PY
# Replayed: AERP on the trained model's shape, its scores from the trace.
"$vp" run "$src/scenarios/studies/llm.yaml" -p system=kelle_edram -p workload.task=none \
  -p workload.model="$t/kjv-llama.safetensors" -p workload.batch=2 -p workload.context_len=128 \
  -p workload.decode_len=64 -p workload.attention.type=trace -p workload.attention.file="$out/ruth.katt" \
  -p policy.kv=aerp -p policy.kv_budget=64 -p policy.recent_window=16 -p workload.progress=false -o "$out/run" > /dev/null
/usr/bin/python3 - "$out/run/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["llm"]["firmware"]["kv_policy"]["name"] == "aerp"
assert r["latency_s"]["total"] > 0
print("replayed: latency", r["latency_s"]["total"], "s")
PY
