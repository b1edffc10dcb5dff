#!/usr/bin/env bash
# sensorveil set-up for the nvidia-gpu profile (sensorveil/devices/profiles/nvidia-gpu.json).
# Run on the board itself, as a user with sudo. Installs the runtime only: numpy and one
# backend library (no torch, no training dependencies). Re-running is harmless.
set -euo pipefail
if ! command -v nvidia-smi >/dev/null; then echo "no nvidia-smi: install the NVIDIA driver first" >&2; exit 1; fi
nvidia-smi -L
python3 -m pip install --user "sensorveil[tensorrt]"
python3 -c "import tensorrt; from cuda import cudart; print('tensorrt', tensorrt.__version__, '+ cuda-python ready')"
