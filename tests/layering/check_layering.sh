#!/usr/bin/env bash
# check_layering.sh BUILD_DIR --wrong name:header... --right name:header...
# Builds each probe object library of tests/layering/CMakeLists.txt. A wrong-way probe must fail
# because its header is not found (and for no other reason); a right-way probe must compile.
set -uo pipefail
build=$1; shift
mode=""; failures=0
for arg in "$@"; do
  case $arg in
    --wrong) mode=wrong; continue ;;
    --right) mode=right; continue ;;
  esac
  name=${arg%%:*}; header=${arg#*:}
  out=$(cmake --build "$build" --target "$name" 2>&1); rc=$?
  if [[ $mode == wrong ]]; then
    if [[ $rc -ne 0 ]] && grep -q "${header}: No such file or directory" <<<"$out"; then
      echo "ok: $name cannot include $header"
    else
      echo "FAIL: $name (rc $rc) should fail with '$header: No such file or directory':"; echo "$out" | tail -20
      failures=$((failures + 1))
    fi
  else
    if [[ $rc -eq 0 ]]; then echo "ok: $name includes $header"; else
      echo "FAIL: $name should compile:"; echo "$out" | tail -20; failures=$((failures + 1)); fi
  fi
done
[[ $failures -eq 0 ]] && echo "layering: every probe as expected" || echo "layering: $failures probe(s) wrong"
exit $((failures > 0))
