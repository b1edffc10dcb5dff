#!/usr/bin/env bash
# sensorveil set-up for the nvidia-gpu profile (sensorveil/devices/profiles/nvidia-gpu.json).
# Run on the board itself, as a user with sudo. Installs the runtime only: numpy and one
# backend library (no torch, no training dependencies). Re-running is harmless.
set -euo pipefail
# sensorveil is installed from the checkout this script lives in (it is not published on PyPI)
SENSORVEIL_SRC="${SENSORVEIL_SRC:-$(cd "$(dirname "$0")/../../.." && pwd)}"
if ! command -v nvidia-smi >/dev/null; then echo "no nvidia-smi: install the NVIDIA driver first" >&2; exit 1; fi
nvidia-smi -L
python3 -m pip install --user "${SENSORVEIL_SRC}[tensorrt,camera]" cryptography
python3 -c "import tensorrt; from cuda import cudart; print('tensorrt', tensorrt.__version__, '+ cuda-python ready')"
