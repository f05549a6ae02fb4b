#!/usr/bin/env bash
# A study of a workload without progress lines (traffic) through the sweep runner: every point
# runs (the runner adds no workload key such a workload would refuse) and lands in the CSV.
set -euo pipefail
vp=$1; src=$2; out=$3
rm -rf "$out"
mkdir -p "$out"
cat > "$out/study.yaml" <<YAML
name: traffic_patterns
base: $src/scenarios/microbench/dram_stream.yaml
overrides: {workload.total_bytes: 1048576}
axes: {workload.pattern: [sequential, random]}
YAML
"$src/scripts/sweep" "$out/study.yaml" --workers 2 --out "$out/results" --kelle-vp "$vp"
python3 - "$out/results/results.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert sorted(r["workload.pattern"] for r in rows) == ["random", "sequential"], rows
print("traffic study:", len(rows), "points")
PY
