#!/usr/bin/env bash
# The installed package, end to end (tests/plugins/CMakeLists.txt):
#   plugins.sh install CMAKE BUILD_DIR PREFIX       cmake --install BUILD_DIR into PREFIX
#   plugins.sh example CMAKE SOURCE BUILD PREFIX    builds the example in SOURCE against PREFIX
#       with plain CMake into BUILD, runs its scenario with PREFIX/bin/kelle-vp and the plugin,
#       and checks results.json for the plugin and its statistics.
set -euo pipefail
mode=$1; cmake=$2

if [ "$mode" = install ]; then
  build=$3; prefix=$4
  rm -rf "$prefix"
  "$cmake" --install "$build" --prefix "$prefix" >/dev/null
  test -x "$prefix/bin/kelle-vp"
  test -f "$prefix/include/kellevp/platform/plugin/plugin.h"
  test -f "$prefix/share/kelle-vp/scenarios/default.yaml"
  ls "$prefix"/lib*/cmake/KelleVP/KelleVPConfig.cmake >/dev/null
  echo "installed into $prefix"
  exit 0
fi

if [ "$mode" = doc ]; then
  # A scheduler written from docs/write-a-scheduler.md alone: the page's marked code block as a
  # plugin's only source, built against the installed package like the examples, then run.
  doc=$3; build=$4; prefix=$5
  rm -rf "$build"; mkdir -p "$build/src"
  sed -n '/<!-- doc-scheduler: begin -->/,/<!-- doc-scheduler: end -->/p' "$doc" | sed '1,2d;$d' | sed '$d' \
    >"$build/src/doc_prefetch.cpp"
  grep -q 'KELLE_REGISTER(schedulers(), "doc_prefetch"' "$build/src/doc_prefetch.cpp"
  cat >"$build/src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(kelle_doc_prefetch LANGUAGES CXX)
find_package(KelleVP 0.1 REQUIRED)
kellevp_add_plugin(kelle_doc_prefetch doc_prefetch.cpp)
CM
  set -- example "$cmake" "$build/src" "$build/out" "$prefix"
  mode=example
fi

src=$3; build=$4; prefix=$5
name=$(basename "$src")
vp="$prefix/bin/kelle-vp"
unset KELLE_VP_SCENARIOS  # the installed kelle-vp must find its own scenarios
rm -rf "$build"
mkdir -p "$(dirname "$build")"
"$cmake" -S "$src" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS=-Werror >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
"$cmake" --build "$build" -j1 >"$build.build.log" 2>&1 || { cat "$build.build.log"; exit 1; }
lib=$(ls "$build"/libkelle_*.so)

run() {  # run OUTDIR ARGS...: runs the example's scenario with the plugin, results into OUTDIR
  local out=$1; shift
  "$vp" run "$@" --plugin "$lib" -q -o "$out" --force
}

check() {  # check RESULTS PYTHON-EXPRESSIONS...: each must hold for r = results.json
  python3 - "$@" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
def stat(suffix, key):
    """The value of statistic `key` of the module whose name ends in `suffix`."""
    for owner, stats in r["stats"].items():
        if owner == suffix or owner.endswith("." + suffix):
            return stats[key]["value"]
    raise KeyError(suffix + " has no statistics in results.json")
for expr in sys.argv[2:]:
    if not eval(expr):
        sys.exit(f"{sys.argv[1]}: check failed: {expr}")
    print("ok:", expr)
PY
}

case "$name" in
  hbm2_memory)
    run "$build/seq" "$src/hbm2_stream.yaml" -p workload.total_bytes=4194304
    check "$build/seq/results.json" \
      '[p["name"] for p in r["plugins"]] == ["hbm2"]' \
      'r["address_map"][-1]["model"] == "hbm2"' \
      'stat("hbm", "row_hit_rate") > 0.9' \
      'stat("hbm", "bursts") == 4194304 / 64' \
      '0.5 * 256 < stat("hbm", "bandwidth_achieved") <= 256' \
      'r["energy_J"]["by_component"]["hbm.access"] > 0'
    run "$build/random" "$src/hbm2_stream.yaml" -p workload.total_bytes=1048576 -p workload.pattern=random -p workload.burst_bytes=64
    check "$build/random/results.json" \
      'stat("hbm", "row_hit_rate") < 0.1' \
      'stat("hbm", "row_misses") + stat("hbm", "row_conflicts") > 0.9 * 1048576 / 64' \
      'r["energy_J"]["by_component"]["hbm.activate"] > 0'
    # In an LLM run as the DRAM: the transactions' traffic classes, counted by the plugin memory.
    run "$build/llm" "$src/hbm2_llm.yaml"
    check "$build/llm/results.json" \
      'stat("hbm", "bytes_weights") >= 6e9' \
      'stat("hbm", "bytes_kv") > 0 and stat("hbm", "bytes_activations") >= 0' \
      'stat("hbm", "bytes_unclassified") == 0' \
      'sum(stat("hbm", "bytes_" + c) for c in ("weights", "kv", "activations", "unclassified")) == stat("hbm", "bytes_read") + stat("hbm", "bytes_written")' \
      'r["traffic_bytes"]["dram_weights"] == stat("hbm", "bytes_weights")' \
      'r["traffic_bytes"]["dram_total"] == stat("hbm", "bytes_read") + stat("hbm", "bytes_written")' \
      'abs(r["energy_breakdown_J"]["dram_weights"] + r["energy_breakdown_J"]["dram_kv"] + r["energy_breakdown_J"]["dram_activations"] - r["energy_J"]["by_component"]["hbm.access"] - r["energy_J"]["by_component"]["hbm.activate"]) < 1e-9 * r["energy_J"]["by_component"]["hbm.access"]' ;;
  lookahead_scheduler)
    run "$build/out" "$src/lookahead.yaml" -p workload.context_len=16 -p workload.decode_len=2
    check "$build/out/results.json" \
      '[p["name"] for p in r["plugins"]] == ["lookahead"]' \
      'r["config"]["scheduler"] == "lookahead"' \
      'stat("lookahead", "cross_layer_prefetches") == 3 * (32 - 1)' \
      'stat("lookahead", "prefetch_lead_s") > 0' ;;
  kv_random_policy)
    # Loaded through the scenario's `plugins:` key this time: a scenario next to the library.
    printf 'include: %s\nplugins: [%s]\n' "$src/kv_random.yaml" "$(basename "$lib")" >"$build/kv_random_here.yaml"
    "$vp" run "$build/kv_random_here.yaml" -q -o "$build/out" --force
    check "$build/out/results.json" \
      '[p["name"] for p in r["plugins"]] == ["kv_random"]' \
      '[os.path.realpath(p) for p in r["config"]["plugins"]] == [r["plugins"][0]["path"]]' \
      'r["config"]["policy"]["kv"] == "random"' \
      'stat("kv_random", "evictions") == 8 * 32 * 32' \
      '0 < stat("kv_random", "evicted_high_score_share") < 1' ;;
  src)  # the scheduler of docs/write-a-scheduler.md: the built-in prefetch's figures, as a plugin
    run "$build/doc" "$prefix/share/kelle-vp/scenarios/default.yaml" -p scheduler=doc_prefetch -p workload.context_len=16 -p workload.decode_len=2
    "$vp" run "$prefix/share/kelle-vp/scenarios/default.yaml" -q -o "$build/builtin" --force -p scheduler=prefetch -p workload.context_len=16 \
      -p workload.decode_len=2
    check "$build/doc/results.json" \
      '[p["name"] for p in r["plugins"]] == ["doc_prefetch"]' \
      'r["latency_s"] == json.load(open(os.path.dirname(sys.argv[1]) + "/../builtin/results.json"))["latency_s"]' \
      'r["activation_lifetimes"] == json.load(open(os.path.dirname(sys.argv[1]) + "/../builtin/results.json"))["activation_lifetimes"]' ;;
  *) echo "unknown example $name"; exit 1 ;;
esac
