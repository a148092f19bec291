#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every public header of an installed prefix, and every *_INIT macro in
# them, compiled as C++17 with -pedantic -Werror (and as C11 with -Wextra):
# a C++ embedder can include the headers and use each initializer.
# Usage: check_cxx_headers.sh INCLUDE_DIR WORK_DIR
set -euo pipefail
inc=$1 work=$2
mkdir -p "$work"
macros=$(grep -ho '^#define ESMT_[A-Z0-9_]*_INIT\b' "$inc"/esmtrain/*.h | awk '{print $2}' | sort -u)
[ -n "$macros" ] || { echo "no *_INIT macros found in $inc/esmtrain" >&2; exit 1; }
{
  # esmtrain.h includes trainer.h, data.h and config.h in place (they refuse
  # to be included alone); backend.h is the plugin ABI
  echo "#include <esmtrain/esmtrain.h>"
  echo "#include <esmtrain/backend.h>"
  echo "int main(void) {"
  for m in $macros; do # ESMT_FOO_BAR_INIT initializes esmt_foo_bar
    t=$(echo "${m%_INIT}" | tr 'A-Z' 'a-z')
    echo "  $t v_$t = $m; (void)v_$t;"
  done
  echo "  return 0;"
  echo "}"
} > "$work/all_inits.c"
cp "$work/all_inits.c" "$work/all_inits.cpp"
g++ -std=c++17 -pedantic -Wall -Wextra -Werror -I"$inc" -c "$work/all_inits.cpp" -o "$work/cxx.o"
cc -std=c11 -pedantic -Wall -Wextra -Werror -I"$inc" -c "$work/all_inits.c" -o "$work/c.o"
echo "C++17 -pedantic and C11: $(echo "$macros" | wc -l) *_INIT macros in $(ls "$inc"/esmtrain/*.h | wc -l) headers"
