#!/usr/bin/env bash
# Every study file the project ships (scenarios/studies/*.yaml, but the studies' base scenario
# llm.yaml) against the current code: scripts/sweep --dry-run expands its points and checks each
# one with `kelle-vp check` (load, validate, elaborate; no simulation), so a study file cannot go
# stale when a key is renamed, refused or given another meaning. About half a minute on 2 cores.
#   study_files.sh KELLE_VP SRC OUT
set -euo pipefail
vp=$1; src=$2; out=$3
rm -rf "$out"; mkdir -p "$out"
studies=0; points=0; bad=()
for f in "$src"/scenarios/studies/*.yaml; do
  name=$(basename "$f" .yaml)
  [ "$name" = llm ] && continue  # the studies' base scenario, not a study file
  check() { "$src/scripts/sweep" "$f" --dry-run --workers 2 --kelle-vp "$vp" --out "$out/$name" \
              >"$out/$name.txt" 2>"$out/$name.err"; }
  # A stale file fails every time; one failure followed by a pass is the host's (a check process
  # lost under a loaded machine, seen once in a full parallel ctest run), said and not counted.
  if check || { echo "study files: $name: failed once, checked again: $(tail -1 "$out/$name.err")" >&2; check; }; then
    n=$(grep -c " run " "$out/$name.txt" || true)
    [ "$n" -gt 0 ] || bad+=("$name: no point listed")
    points=$((points + n))
  else
    bad+=("$name: $(tail -1 "$out/$name.err")")
  fi
  studies=$((studies + 1))
done
[ "$studies" -ge 20 ] || { echo "study files: only $studies study files found under $src/scenarios/studies" >&2; exit 1; }
if [ ${#bad[@]} -gt 0 ]; then
  printf 'study files: %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "study files: $studies studies, $points scenarios (points and their quality runs), every one accepted by kelle-vp check"
