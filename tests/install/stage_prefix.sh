#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install BUILD_DIR into DIR/configured, then move it to DIR/moved: nothing
# may depend on the prefix given at install time. Prints the moved prefix.
# Usage: stage_prefix.sh BUILD_DIR DIR
set -euo pipefail
build=$1 dir=$2
cmake --install "$build" --prefix "$dir/configured" >/dev/null
mv "$dir/configured" "$dir/moved"
echo "$dir/moved"
