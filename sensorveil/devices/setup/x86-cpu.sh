#!/usr/bin/env bash
# sensorveil set-up for the x86-cpu profile (sensorveil/devices/profiles/x86-cpu.json).
# Run on the board itself, as a user with sudo. Installs the runtime only: numpy and one
# backend library (no torch, no training dependencies). Re-running is harmless.
set -euo pipefail
python3 -m pip install --user "sensorveil[onnx]"
python3 -c "import onnxruntime; print('onnxruntime', onnxruntime.__version__)"
# optional extra backends on the same CPU: "sensorveil[openvino]" or "sensorveil[tflite]"
