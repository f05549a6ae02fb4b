#!/usr/bin/env bash
# The design-space search (scripts/explore, docs/explore.md) on a small space
# (tests/studies/explore_tiny.yaml, 24 designs x 2 workloads of a 2-layer model):
#   - the space gridded exhaustively with the sweep runner (every design simulated), its Pareto
#     front computed here from the simulations alone (area from the simulated modules' statistics);
#   - the search (NSGA-II screening with kelle-vp estimate on 2 worker processes sharing one
#     journal, the designs near the front simulated, at most 10 of the feasible ones): its final
#     front must be the exhaustive front, the same designs with the same simulated figures;
#   - a cap (search.max_simulated 5) below the estimated front said in one note line, and no note
#     when the cap left no front design out;
#   - the search stopped after half its trials (--no-simulate) and resumed: the same front as the
#     uninterrupted search's;
#   - the search resumed with more trials (the study continues; nothing is simulated twice; the
#     front's polished neighbours still counted);
#   - the HTML page opened in headless chromium: the front's points are drawn;
#   - each front design's scenario file accepted by kelle-vp check;
#   - bad space files and bad --designs lines refused in one line naming the file and line (the
#     other kinds of bad space file and results folder: tests/scripts/, under pytest).
# About a minute on 2 cores.
#   explore.sh KELLE_VP SRC OUT
set -euo pipefail
vp=$1; src=$2; out=$3
space=$src/tests/studies/explore_tiny.yaml
explore=$src/scripts/explore
die() { echo "explore test: $*" >&2; exit 1; }
step() { echo "== $*"; }
rm -rf "$out"; mkdir -p "$out"

step "exhaustive grid through the sweep runner"
"$explore" "$space" --write-grid-study "$out/grid.yaml" --kelle-vp "$vp"
"$src/scripts/sweep" "$out/grid.yaml" --out "$out/grid" --kelle-vp "$vp" --workers 2 >"$out/grid.txt"

step "the estimate moves the simulation's bytes"
# On every grid point: the estimate's access energies of the DRAM, the weight SRAM and the
# activation eDRAM (bytes x energy per byte: the operands the firmware moves, where it puts them)
# within 1 % of the simulated ones.
/usr/bin/python3 - "$vp" "$src" "$out" <<'PY'
import json, subprocess, sys
import yaml
vp, src, out = sys.argv[1:4]
sys.path.insert(0, f"{src}/scripts")
from kellevp import sweep
grid = yaml.safe_load(open(f"{out}/grid.yaml"))
lines = [json.dumps({"id": i, "overrides": {**grid["overrides"], **p}}) for i, p in enumerate(grid["points"])]
r = subprocess.run([vp, "estimate", f"{src}/scenarios/studies/llm.yaml", "--designs", "-"], input="\n".join(lines),
                   stdout=subprocess.PIPE, text=True, check=True)
worst = {}
for line in r.stdout.splitlines():
    e = json.loads(line)
    sim = json.load(open(f"{out}/grid/{sweep.point_id(grid['points'][e['id']])}/results.json"))["energy_J"]["by_component"]
    for k in ("dram.access", "weight_sram.access", "act_edram.access"):
        d = abs(e["energy_J"][k] / sim[k] - 1)
        assert d < 0.01, f"point {e['id']}: {k}: estimate {e['energy_J'][k]} J, simulated {sim[k]} J"
        worst[k] = max(worst.get(k, 0), d)
print("estimate against simulation, largest difference over the grid: " +
      ", ".join(f"{k} {v:.2%}" for k, v in worst.items()))
PY

step "the search"
"$explore" "$space" --out "$out/search" --kelle-vp "$vp" --workers 1 | tee "$out/search.txt"

step "the search's front against the exhaustive front"
/usr/bin/python3 - "$out" <<'PY'
import csv, json, math, sys
import yaml
out = sys.argv[1]
grid = yaml.safe_load(open(f"{out}/grid.yaml"))
params = ["system.compute.rsa.rows", "system.memories.kv_edram.capacity_MiB",
          "system.memories.weight_sram.capacity_MiB", "policy.refresh"]
weights = {"1": 1.0, "4": 2.0}  # workload.batch -> weight (the space's)
designs = {}
for p in grid["points"]:
    key = tuple(p[k] for k in params)
    designs.setdefault(key, []).append(p)
assert len(designs) == 24, len(designs)
rows = {r["scenario"]: r for r in csv.DictReader(open(f"{out}/grid/results.csv"))}
def pid(p):  # scripts/sweep's point folder
    return "_".join(f"{k.split('.')[-1]}-{v}" for k, v in p.items()).replace("/", "-").replace(" ", "")
objs = {}
for key, pts in designs.items():
    lat, ept, w, area, fits = [], [], [], None, True
    for p in pts:
        r = json.load(open(f"{out}/grid/{pid(p)}/results.json"))
        lat.append(r["latency_s"]["total"])
        ept.append(r["energy_J"]["total"] / r["throughput"]["generated_tokens"])
        w.append(weights[p["workload.batch"]])
        fits = fits and not r["llm"].get("dram_overflow_bytes")
        a = sum(m["area"]["value"] for m in r["stats"].values() if isinstance(m, dict) and "area" in m)
        area = a
    g = lambda v: math.exp(sum(wi * math.log(x) for x, wi in zip(v, w)) / sum(w))
    if area <= 4 and fits:
        objs[key] = (g(lat), g(ept), area)
front = {k: v for k, v in objs.items()
         if not any(all(o[i] <= v[i] for i in range(3)) and o != v for o in objs.values())}
print(f"exhaustive: {len(objs)} feasible designs of 24, front {len(front)}: {sorted(front)}")
got = {}
for r in csv.DictReader(open(f"{out}/search/front.csv")):
    key = tuple(r[k] for k in params)
    got[key] = (float(r["sim.latency"]), float(r["sim.energy_per_token"]), float(r["sim.area"]))
norm = lambda k: tuple(str(yaml.safe_load(x)) for x in k)
a = {norm(k): v for k, v in front.items()}
b = {norm(k): v for k, v in got.items()}
assert set(a) == set(b), f"fronts differ: exhaustive {sorted(a)} search {sorted(b)}"
for k in a:
    for x, y in zip(a[k], b[k]):
        assert math.isclose(x, y, rel_tol=1e-12), f"{k}: exhaustive {a[k]} search {b[k]}"
print(f"the search's front equals the exhaustive front: {len(a)} designs, same simulated figures")
# ... from a screened subset: the space caps the simulations at 10 designs (search.max_simulated),
# fewer than the feasible ones, so the front is the exhaustive one only if the estimate ranked well.
sim = [r for r in csv.DictReader(open(f"{out}/search/simulated.csv")) if not r["label"]]
assert 0 < len(sim) <= 10 < len(objs), f"{len(sim)} designs simulated of {len(objs)} feasible, expected at most 10"
print(f"from {len(sim)} simulated designs of {len(objs)} feasible")
PY

step "a search stopped half way and resumed gives the uninterrupted search's front"
"$explore" "$space" --out "$out/halves" --kelle-vp "$vp" --workers 1 --trials 36 --no-simulate >"$out/halves1.txt"
"$explore" "$space" --out "$out/halves" --kelle-vp "$vp" --workers 1 >"$out/halves2.txt"
grep -Eq "; (3[6-9]|[4-6][0-9]) of 72 trials done" "$out/halves2.txt" || die "the second half did not resume: $(head -2 "$out/halves2.txt")"
/usr/bin/python3 - "$out" <<'PY'
import csv, sys
out = sys.argv[1]
def front(folder):
    return {r["design"]: (r["sim.latency"], r["sim.energy_per_token"], r["sim.area"])
            for r in csv.DictReader(open(f"{out}/{folder}/front.csv"))}
a, b = front("search"), front("halves")
assert a == b, f"uninterrupted front {sorted(a)}, resumed front {sorted(b)}"
print(f"the resumed search's front equals the uninterrupted one's: {len(a)} designs, the same simulated figures")
PY

step "a cap below the estimated front is said"
! grep -q "^note: search.max_simulated" "$out/search.txt" || die "the note on a cap that left no front design out"
sed -e 's/^  max_simulated: 10$/  max_simulated: 5/' -e "s#^base: .*#base: $src/scenarios/studies/llm.yaml#" \
  "$space" >"$out/cap5.yaml"
grep -q "max_simulated: 5" "$out/cap5.yaml" || die "the cap-5 space was not written"
"$explore" "$out/cap5.yaml" --out "$out/cap5" --kelle-vp "$vp" --workers 1 >"$out/cap5.txt"
grep -q "^note: search.max_simulated 5 left [1-9][0-9]* of the estimated front's [0-9]* designs unsimulated" \
  "$out/cap5.txt" || die "a cap below the estimated front is not said: $(grep -v '^ ' "$out/cap5.txt" | tail -3)"
grep -q "^note: search.max_simulated 5" "$out/cap5/summary.txt" || die "summary.txt lacks the cap's note"

step "resume: more trials on the same study"
"$explore" "$space" --out "$out/search" --kelle-vp "$vp" --workers 2 --trials 90 >"$out/resume.txt"
n=$(($(wc -l <"$out/search/trials.csv") - 1))
[ "$n" -ge 90 ] || die "the resumed search holds $n trials, expected 90"
had=$(sed -n 's/.*; \([0-9]*\) of 90 trials done.*/\1/p' "$out/resume.txt")
[ -n "$had" ] && [ "$had" -ge 72 ] || die "the search did not resume from its 72 trials: $(head -1 "$out/resume.txt")"
# Every simulation the resumed search asks for is one the first run already did (sweep's "N already
# done, 0 to run"; a first run prints "0 already done").
grep -Eq "[1-9][0-9]* already done, 0 to run" "$out/resume.txt" || die "the resumed search simulated its designs again"
! grep -Eq "already done, [1-9][0-9]* to run" "$out/resume.txt" || die "the resumed search simulated designs again"
# The front's neighbours the first run polished are still counted in the resumed study.
nb() { sed -n "s/.*; \([0-9]*\) of them the front's neighbours.*/\1/p" "$1"; }
first=$(nb "$out/search.txt"); again=$(nb "$out/resume.txt")
[ -n "$first" ] && [ "$first" -gt 0 ] && [ -n "$again" ] && [ "$again" -ge "$first" ] \
  || die "the front's neighbours: $first in the first run, $again counted after the resume"

step "the HTML page in headless chromium"
command -v chromium >/dev/null || die "chromium is missing (./scripts/setup-deps installs it)"
chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=10000 \
  --dump-dom "file://$out/search/front.html" >"$out/dom.html" 2>"$out/chromium.txt" \
  || die "chromium failed: $(tail -1 "$out/chromium.txt")"
/usr/bin/python3 - "$out" <<'PY'
import csv, re, sys
out = sys.argv[1]
dom = open(f"{out}/dom.html").read()
front = list(csv.DictReader(open(f"{out}/search/front.csv")))
# Plotly draws each scatter trace as <g class="trace scatter"> with one <path class="point"> per point.
traces = re.split(r'<g class="trace scatter', dom)[1:]
assert traces, "no scatter trace drawn (plotly did not run)"
counts = [len(re.findall(r'class="point"', t)) for t in traces]
print(f"drawn: {len(traces)} scatter traces, points per trace {counts}")
assert counts[2] == len(front), f"the front trace has {counts[2]} points, front.csv {len(front)} designs"
assert all(c == 1 for c in counts[3:5]), "the paper's two designs are drawn"
print("the HTML page draws the front's points")
PY

step "front designs as scenario files"
for f in "$out"/search/designs/*.yaml; do "$vp" check "$f" -p workload.batch=1 >/dev/null || die "$f is refused"; done

step "bad inputs"
bad() {  # bad NAME EXPECTED-MESSAGE-REGEX, the space file on stdin
  cat >"$out/$1.yaml"
  rc=0; "$explore" "$out/$1.yaml" --out "$out/bad-$1" --kelle-vp "$vp" 2>"$out/$1.err" >/dev/null || rc=$?
  [ "$rc" -eq 2 ] || die "$1: exit $rc, expected 2"
  [ "$(wc -l <"$out/$1.err")" -eq 1 ] || die "$1: the error is not one line: $(cat "$out/$1.err")"
  grep -Eq "$2" "$out/$1.err" || die "$1: unexpected error: $(cat "$out/$1.err")"
}
head=$(printf 'base: %s\nworkloads: [{workload.batch: 1}]\nobjectives: [latency, area]\n' "$src/scenarios/studies/llm.yaml")
bad dup "dup.yaml:6: parameters.system.compute.rsa.rows: duplicate key \(first given at line 5\)" <<EOF
$head
parameters:
  system.compute.rsa.rows: {choices: [8, 16]}
  system.compute.rsa.rows: {choices: [32]}
EOF
bad range "range.yaml:5: parameters.system.compute.rsa.rows.range: expected low < high" <<EOF
$head
parameters:
  system.compute.rsa.rows: {range: [32, 8]}
EOF
bad key "key.yaml:5: parameters.system.compute.rsa.rowz = 8: .*unknown key 'system.compute.rsa.rowz'" <<EOF
$head
parameters:
  system.compute.rsa.rowz: {choices: [8, 16]}
EOF
bad objective "objective.yaml:3: objectives: unknown objective 'latncy'; did you mean 'latency'" <<EOF
base: $src/scenarios/studies/llm.yaml
workloads: [{workload.batch: 1}]
objectives: [latncy]
parameters:
  system.compute.rsa.rows: {choices: [8, 16]}
EOF
bad derived "derived.yaml:7: derived.system.compute.rsa.cols: '\\$\{rows\}' is not a parameter" <<EOF
$head
parameters:
  system.compute.rsa.rows: {choices: [8, 16]}
derived:
  system.compute.rsa.cols: "\${rows}"
EOF
bad quality "quality.yaml:[0-9]+: constraints.quality_command: needed by quality_loss_max" <<EOF
$head
parameters:
  system.compute.rsa.rows: {choices: [8, 16]}
constraints:
  quality_loss_max: 0.01
EOF
printf '{"workload.batch": 2}\nnot json\n' >"$out/designs.jsonl"
rc=0; "$vp" estimate "$src/scenarios/default.yaml" --designs "$out/designs.jsonl" >/dev/null 2>"$out/estimate.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "designs.jsonl:2: expected a JSON object" "$out/estimate.err" \
  || die "a bad --designs line: $(cat "$out/estimate.err")"
echo "explore: ok"
