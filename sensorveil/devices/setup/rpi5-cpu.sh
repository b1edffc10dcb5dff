#!/usr/bin/env bash
# sensorveil set-up for the rpi5-cpu profile (sensorveil/devices/profiles/rpi5-cpu.json):
# Raspberry Pi 4 or 5 on Raspberry Pi OS Bookworm, 64-bit. Run on the board itself. Installs the
# runtime only: numpy and onnxruntime (LiteRT beside it), OpenCV (camera sources and the camera pipeline)
# and cryptography (signed bundles), no torch. Re-running is harmless.
# Bookworm's pip refuses to install into the system Python (PEP 668, "externally-managed-environment"),
# so the runtime gets its own virtual environment, SENSORVEIL_VENV (default ~/.sensorveil); use its python3.
# scripts/device_matrix.py runs this script unchanged in an emulated Bookworm, with PIP_NO_INDEX and
# PIP_FIND_LINKS pointing pip at a folder of PyPI's aarch64 wheels.
set -euo pipefail
# sensorveil is installed from the checkout this script lives in (it is not published on PyPI)
SENSORVEIL_SRC="${SENSORVEIL_SRC:-$(cd "$(dirname "$0")/../../.." && pwd)}"
SENSORVEIL_VENV="${SENSORVEIL_VENV:-$HOME/.sensorveil}"
if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
    sudo apt-get update && sudo apt-get install -y python3-venv
fi
python3 -m venv "$SENSORVEIL_VENV"
"$SENSORVEIL_VENV/bin/python3" -m pip install "$SENSORVEIL_SRC" onnxruntime ai-edge-litert opencv-python-headless \
    cryptography
"$SENSORVEIL_VENV/bin/python3" -c "import onnxruntime, cv2, cryptography; print('onnxruntime', \
onnxruntime.__version__, 'opencv', cv2.__version__, 'cryptography', cryptography.__version__)"
echo "the runtime's Python: $SENSORVEIL_VENV/bin/python3 (PYTHON=$SENSORVEIL_VENV/bin/python3 scripts/device_benchmark.sh BUNDLE)"
