#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run HERE (a machine with Debian's apt), before a device call: downloads
# the .deb files the GPU machine lacks (it reaches no package registry)
# into .gpu-deps/ at the repo root, which .git/info/exclude ignores and the
# device call carries. run_all.sh unpacks them into a private prefix there.
set -euo pipefail
cd "$(dirname "$0")/../.."
# .gpu-deps/ is in .gitignore, so the device call must name it in carry.
mkdir -p .gpu-deps && cd .gpu-deps
rm -f ./*.deb
# Run time (also what tests/gpu/prebuild.sh carries): the library's and the
# tests' shared libraries; build time: their -dev packages and protoc-c.
# (cpu.so dlopen()s OpenBLAS, which needs libgfortran)
runtime="libcmocka0 libjansson4 libyaml-0-2 libcsv3 libprotobuf-c1 libisal2 libgomp1
  libopenblas0-pthread libopenblas0 libgfortran5"
buildtime="libcmocka-dev libjansson-dev libyaml-dev zlib1g-dev libcsv-dev libprotobuf-c-dev
  libisal-dev libopenblas-pthread-dev libopenblas-dev protobuf-c-compiler libprotoc32 libprotobuf32"
# shellcheck disable=SC2086
apt-get download $runtime $buildtime mmseqs2-examples 2>&1 | tail -2
printf '%s\n' $runtime > RUNTIME
ls -la
du -sh .
