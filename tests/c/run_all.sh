#!/usr/bin/env bash
# Runs every C test executable in the build dir given as $1, shows each
# one's output (its last line is "N passed, N failed") and a total; exits
# nonzero on any failure or crash.
set -u
passed=0 failed=0 status=0
for t in "$1"/tests/c/test_*; do
  [ -x "$t" ] || continue
  out=$("$t" 2>&1) || status=1
  printf '%s\n' "$out"
  line=${out##*$'\n'}
  case "$line" in
    *" passed, "*" failed")
      p=${line##*: }; p=${p%% passed*}; f=${line##*passed, }; f=${f%% failed}
      passed=$((passed + p)); failed=$((failed + f)) ;;
    *) echo "$t: did not finish (crashed?)"; status=1 ;;
  esac
done
echo "C tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && exit "$status" || exit 1
