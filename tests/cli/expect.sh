#!/usr/bin/env bash
# expect.sh EXIT_CODE REGEX COMMAND...: runs COMMAND, checks its exit code and that its combined
# output matches the extended regular expression REGEX.
set -u
want_rc=$1; regex=$2; shift 2
out=$("$@" 2>&1); rc=$?
if [ "$rc" != "$want_rc" ]; then
  printf 'exit code %s, expected %s\n--- output ---\n%s\n' "$rc" "$want_rc" "$out"; exit 1
fi
if ! grep -Eq -- "$regex" <<<"$out"; then
  printf 'output does not match /%s/\n--- output ---\n%s\n' "$regex" "$out"; exit 1
fi
echo ok
