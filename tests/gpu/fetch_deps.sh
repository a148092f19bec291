#!/usr/bin/env bash
# Run HERE (a machine with Debian's apt), before a device call: downloads
# the .deb files the GPU machine lacks (it reaches no package registry)
# into .gpu-deps/ at the repo root, which .git/info/exclude ignores and the
# device call carries. run_all.sh unpacks them into a private prefix there.
set -euo pipefail
cd "$(dirname "$0")/../.."
# .gpu-deps/ is in .gitignore, so the device call must name it in carry.
mkdir -p .gpu-deps && cd .gpu-deps
rm -f ./*.deb
apt-get download libcmocka0 libcmocka-dev libopenblas0-pthread libopenblas-pthread-dev \
  libopenblas-dev libopenblas0 libjansson4 libjansson-dev libyaml-0-2 libyaml-dev zlib1g-dev \
  libgfortran5 mmseqs2-examples 2>&1 | tail -2
ls -la
du -sh .
