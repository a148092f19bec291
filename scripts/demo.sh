#!/usr/bin/env bash
# The main job on a fresh machine: install, build, and run esmtrain.
# (Today: probe the machine. Training on real proteins arrives with the
# trainer; this script grows with it.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/bin/esmtrain-example probe
