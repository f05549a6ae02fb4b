#!/usr/bin/env bash
# Quality as a search objective (docs/explore.md, "Quality as an objective"):
#   - scripts/quality-loss runs the trained model's quality path once per distinct set of quality
#     keys: a second design that differs only in hardware (and in a timing-only key) is answered
#     from the cache, without a run;
#   - scripts/explore with the quality_loss objective (tests/studies/explore_quality.yaml: 4
#     designs, the array's rows x the KV format, on 2 workers) asks it for every design and the
#     paper's two designs: one run per distinct format and reference, every trial's quality loss is
#     its format's cached record, the simulated front carries it.
# About 30 s on 2 cores.
#   explore_quality.sh KELLE_VP SRC OUT
set -euo pipefail
vp=$1; src=$2; out=$3
ql=$src/scripts/quality-loss
die() { echo "explore_quality test: $*" >&2; exit 1; }
rm -rf "$out"; mkdir -p "$out"
export KELLE_VP=$vp

echo "== quality-loss caches by the quality keys"
q=(--cache "$out/cache/quality-cache.jsonl" -p workload.decode_len=31 --json)
echo '{"system.compute.rsa.rows": 16, "policy.kv_format": "int8", "policy.exact_sequences": 1}' \
  | "$ql" "${q[@]}" >"$out/first.json"
echo '{"system.compute.rsa.rows": 32, "policy.kv_format": "int8", "workload.batch": 16}' \
  | "$ql" "${q[@]}" >"$out/second.json"
echo '{"system.compute.rsa.rows": 32, "policy.kv_format": "int4"}' | "$ql" "${q[@]}" >"$out/third.json"
/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
a, b, c = (json.load(open(f"{out}/{n}.json")) for n in ("first", "second", "third"))
assert not a["cached"] and b["cached"] and not c["cached"], (a["cached"], b["cached"], c["cached"])
assert a["quality_keys"] == {"policy.kv_format": "int8"} and a["key"] == b["key"] != c["key"], (a, b, c)
assert a["kl"] == b["kl"] and a["kv_format"] == "int8" and c["kv_format"] == "int4", (a, b, c)
assert 0 < a["kl"] < c["kl"], (a["kl"], c["kl"])  # 4-bit codes cost more than 8-bit ones
runs = [d for d in os.listdir(f"{out}/cache/quality-runs") if not d.endswith(".lock")]
recs = [json.loads(l) for l in open(f"{out}/cache/quality-cache.jsonl")]
assert len(runs) == 2 and len(recs) == 2, (runs, len(recs))
r = json.load(open(f"{out}/cache/quality-runs/{a['key']}/results.json"))
assert r["quality"]["full_cache"]["kl_divergence"] == a["kl"] and r["functional"]["kv_format"] == "int8"
print(f"cached: int8 KL {a['kl']:.3g} (one run for two designs), int4 KL {c['kl']:.3g}")
PY
# The loss alone, as the search reads it: the cached record's KL, one number.
loss=$(echo '{"policy.kv_format": "int8"}' | "$ql" --cache "$out/cache/quality-cache.jsonl" -p workload.decode_len=31)
[ "$loss" = "$(/usr/bin/python3 -c "import json; print(f'{json.load(open(\"$out/first.json\"))[\"kl\"]:.9g}')")" ] \
  || die "the printed loss $loss is not the record's KL"
rc=0; echo 'not json' | "$ql" --cache "$out/cache/quality-cache.jsonl" 2>"$out/bad.err" >/dev/null || rc=$?
[ "$rc" -eq 2 ] && grep -q "stdin: expected a JSON object" "$out/bad.err" || die "bad stdin: $(cat "$out/bad.err")"

echo "== the search with the quality objective"
"$src/scripts/explore" "$src/tests/studies/explore_quality.yaml" --out "$out/search" --kelle-vp "$vp" --workers 2 \
  | tee "$out/search.txt"
/usr/bin/python3 - "$out/search" <<'PY'
import csv, json, os, sys
s = sys.argv[1]
recs = [json.loads(l) for l in open(f"{s}/quality-cache.jsonl")]
runs = [d for d in os.listdir(f"{s}/quality-runs") if not d.endswith(".lock")]
# Two formats and the paper's two designs (their system key): four quality runs for six designs.
assert len(recs) == 4 and len(runs) == 4 and len({r["key"] for r in recs}) == 4, (len(recs), runs)
# The loss as scripts/quality-loss prints it (9 significant digits) is what the search records.
by_fmt = {r["quality_keys"].get("policy.kv_format"): float(f"{r['kl']:.9g}") for r in recs
          if "system" not in r["quality_keys"]}
assert set(by_fmt) == {"binary16", "int4"}, by_fmt
for r in recs:  # the space's overrides reach the quality run (its budget and window), the timing-only keys do not
    assert r["quality_keys"]["policy.kv_budget"] == "24" and r["quality_keys"]["policy.recent_window"] == "8", r
trials = list(csv.DictReader(open(f"{s}/trials.csv")))
assert len(trials) == 4, len(trials)
for t in trials:
    assert float(t["est.quality_loss"]) == by_fmt[t["policy.kv_format"]], t
front = list(csv.DictReader(open(f"{s}/front.csv")))
assert front and all(float(r["sim.quality_loss"]) == by_fmt[r["policy.kv_format"]] for r in front if r["label"] == ""), front
sim = list(csv.DictReader(open(f"{s}/simulated.csv")))
refs = [r for r in sim if r["label"]]
assert len(refs) == 2 and all(float(r["sim.quality_loss"]) > 0 for r in refs), refs
print(f"the search asked for quality {len(trials) + 2} times and ran it {len(runs)} times; "
      f"binary16 {by_fmt['binary16']:.3g}, int4 {by_fmt['int4']:.3g}; front {len(front)} designs")
PY
echo "explore_quality: ok"
