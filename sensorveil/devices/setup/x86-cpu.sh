#!/usr/bin/env bash
# sensorveil set-up for the x86-cpu profile (sensorveil/devices/profiles/x86-cpu.json).
# Run on the board itself, as a user with sudo. Installs the runtime only: numpy and one
# backend library (no torch, no training dependencies). Re-running is harmless.
set -euo pipefail
# sensorveil is installed from the checkout this script lives in (it is not published on PyPI)
SENSORVEIL_SRC="${SENSORVEIL_SRC:-$(cd "$(dirname "$0")/../../.." && pwd)}"
python3 -m pip install --user "${SENSORVEIL_SRC}[onnx,camera]" cryptography
python3 -c "import onnxruntime; print('onnxruntime', onnxruntime.__version__)"
# optional extra backends on the same CPU: "${SENSORVEIL_SRC}[openvino]" or "sensorveil[tflite]"
