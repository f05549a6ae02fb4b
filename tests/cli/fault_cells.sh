#!/usr/bin/env bash
# Functional mode's fault draws are a function of a cell's place in its array, not of the system's
# address map (docs/functional.md, "Faults"): the tiny functional scenario with a fixed bit-error
# rate gives the same flips and logits with the KV eDRAM at its own base address and moved.
#   fault_cells.sh KELLE_VP SCENARIOS OUT
set -euo pipefail
vp=$1; sc=$2; out=$3
rm -rf "$out"; mkdir -p "$out"
run() {  # run NAME [-p ...]: prints the logits digest and the flipped bits
  local name=$1; shift
  "$vp" run "$sc/functional/tiny.yaml" -q -p functional.faults.mode=ber -p functional.faults.ber=1e-3 "$@" \
    -o "$out/$name" >/dev/null
  /usr/bin/python3 -c "import json, sys; j = json.load(open(sys.argv[1])); \
print(j['functional']['logits_digest'], int(sum(j['quality']['flipped_bits'].values())))" "$out/$name/results.json"
}
a=$(run here); b=$(run moved -p system.memories.kv_edram.base_addr=0x1400000000)
[ "${a#* }" -gt 0 ] || { echo "fault_cells: no bit flipped ($a)"; exit 1; }
[ "$a" = "$b" ] || { echo "fault_cells: the KV eDRAM moved in the address map changed the faults: $a against $b"; exit 1; }
echo "ok: $a"
