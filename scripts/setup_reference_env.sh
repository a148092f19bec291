#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the PyTorch reference environment used by tests/reference/
# (fixture generation and the PyTorch peer benchmark). Idempotent: does
# nothing when everything is already there.
#
#   Debian:  python3-torch (1.13.1), python3-numpy, python3-pip
#   PyPI:    fair-esm, transformers (pinned: last line verified with torch 1.13),
#            lion-pytorch (pinned, without dependencies)
#   TensorBoard's event reader (tests/interop/test_tensorboard.py): PyPI
#            tensorboard + tensorboard-data-server (pinned, without
#            dependencies: they are Debian's python3-protobuf/-grpcio/...)
#   Parquet inputs (scripts/parquet_to_fasta.py, tests/interop/test_tables.sh):
#            PyPI pyarrow (pinned; it requires nothing)
#   LoRA references (docs/finetune.md): PyPI peft + accelerate (pinned, without
#            dependencies: the rest they need comes with transformers and Debian)
#
# Everything is for Debian's /usr/bin/python3 (the PATH python3 may be a
# pyenv interpreter without torch). Needs root (or sudo) for apt-get and for
# the system-wide pip install.
set -euo pipefail

PY=/usr/bin/python3
TRANSFORMERS_VERSION=4.44.2
FAIR_ESM_VERSION=2.0.0
# The Lion reference (tests/reference/make_lion_fixture.py): its authors'
# PyTorch port; --no-deps, as its only requirement is torch (Debian's).
LION_VERSION=0.2.2
# TensorBoard: 2.20.0 is the newest that accepts Debian's protobuf (3.21;
# 2.21 needs protobuf >= 6.31); its other requirements are Debian's too.
TENSORBOARD_VERSION=2.20.0
TB_DATA_SERVER_VERSION=0.7.2
# pyarrow: a manylinux wheel for Python 3.11 with no requirements (numpy optional).
PYARROW_VERSION=21.0.0
# peft: 0.12.0 is the newest that accepts torch 1.13 with transformers 4.44; its
# accelerate requirement (>= 0.21) pinned to 0.33.0, which accepts torch >= 1.10.
PEFT_VERSION=0.12.0
ACCELERATE_VERSION=0.33.0
DEB_PKGS=(python3-torch python3-numpy python3-pip python3-protobuf python3-absl python3-grpcio
          python3-markdown python3-werkzeug python3-pil python3-six python3-packaging)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${DEB_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup_reference_env: apt installing ${missing[*]}"
  # apt-get update only when some package has no install candidate yet
  need_update=0
  for p in "${missing[@]}"; do
    cand=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/{print $2}')
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then need_update=1; fi
  done
  if [ "$need_update" -eq 1 ]; then $SUDO apt-get update -qq; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

have_py_pkgs() {
  "$PY" - "$TRANSFORMERS_VERSION" "$FAIR_ESM_VERSION" "$LION_VERSION" "$TENSORBOARD_VERSION" \
    "$PYARROW_VERSION" "$PEFT_VERSION" "$ACCELERATE_VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
assert version("transformers") == sys.argv[1], "transformers version"
assert version("fair-esm") == sys.argv[2], "fair-esm version"
assert version("lion-pytorch") == sys.argv[3], "lion-pytorch version"
assert version("tensorboard") == sys.argv[4], "tensorboard version"
assert version("pyarrow") == sys.argv[5], "pyarrow version"
assert version("peft") == sys.argv[6], "peft version"
assert version("accelerate") == sys.argv[7], "accelerate version"
import peft                                  # noqa: F401
import pyarrow.parquet                       # noqa: F401
import lion_pytorch                          # noqa: F401
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: F401
import torch, numpy, esm                     # noqa: F401
from transformers import EsmForMaskedLM     # noqa: F401
EOF
}

if ! have_py_pkgs; then
  echo "setup_reference_env: pip installing fair-esm==$FAIR_ESM_VERSION transformers==$TRANSFORMERS_VERSION"
  $SUDO "$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --break-system-packages \
    "fair-esm==$FAIR_ESM_VERSION" "transformers==$TRANSFORMERS_VERSION"
  $SUDO "$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --break-system-packages --no-deps "lion-pytorch==$LION_VERSION" \
    "tensorboard==$TENSORBOARD_VERSION" "tensorboard-data-server==$TB_DATA_SERVER_VERSION" \
    "pyarrow==$PYARROW_VERSION" "peft==$PEFT_VERSION" "accelerate==$ACCELERATE_VERSION"
  have_py_pkgs || { echo "setup_reference_env: python packages still not importable" >&2; exit 1; }
fi

"$PY" -c 'import torch, transformers, esm, numpy; from importlib.metadata import version as v
print("setup_reference_env: ok: torch", torch.__version__, "numpy", numpy.__version__,
      "transformers", transformers.__version__, "fair-esm", v("fair-esm"),
      "tensorboard", v("tensorboard"), "pyarrow", v("pyarrow"), "peft", v("peft"))'
