#!/usr/bin/env bash
# expect_error.sh EXIT_CODE REGEX COMMAND...: runs COMMAND, checks its exit code, that it printed
# exactly one line (stdout and stderr together) and that the line matches REGEX.
set -u
want_rc=$1; regex=$2; shift 2
out=$("$@" 2>&1); rc=$?
lines=$(printf '%s\n' "$out" | wc -l)
if [ "$rc" != "$want_rc" ] || [ "$lines" != 1 ] || ! grep -Eq -- "$regex" <<<"$out"; then
  printf 'exit code %s (expected %s), %s lines (expected 1), expected /%s/\n--- output ---\n%s\n' \
    "$rc" "$want_rc" "$lines" "$regex" "$out"
  exit 1
fi
echo ok
