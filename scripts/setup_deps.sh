#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian packages esmtrain builds and tests with. Idempotent:
# runs apt-get only for what is missing. Needs root (or sudo).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-dev libopenblas0-openmp libcmocka-dev zlib1g-dev
      libyaml-dev libjansson-dev mmseqs2-examples binutils clang libclang-rt-14-dev valgrind
      libprotobuf-c-dev protobuf-c-compiler libisal-dev libcairo2-dev tmux mmseqs2
      fonts-dejavu-core libcsv-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup_deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
