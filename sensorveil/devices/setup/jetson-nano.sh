#!/usr/bin/env bash
# sensorveil set-up for the jetson-nano profile (sensorveil/devices/profiles/jetson-nano.json).
# Run on the board itself, as a user with sudo. Installs the runtime only: numpy and one
# backend library (no torch, no training dependencies). Re-running is harmless.
set -euo pipefail
# sensorveil is installed from the checkout this script lives in (it is not published on PyPI)
SENSORVEIL_SRC="${SENSORVEIL_SRC:-$(cd "$(dirname "$0")/../../.." && pwd)}"
# JetPack 4.6.x ships TensorRT 8.2.1 with its Python bindings for the system python3 (3.6).
if [ ! -f /etc/nv_tegra_release ]; then echo "not a Jetson (no /etc/nv_tegra_release); flash JetPack 4.6.x first" >&2; exit 1; fi
sudo apt-get update
sudo apt-get install -y python3-pip python3-libnvinfer python3-numpy cuda-toolkit-10-2
# cuda-python needs CUDA >= 11, so the Nano's adapter uses pycuda for device buffers.
export PATH=/usr/local/cuda/bin:$PATH
python3 -m pip install --user pycuda
# JetPack's image has OpenCV for python3 (camera sources, the camera pipeline); Ubuntu 18.04's python3-cryptography
# predates Ed25519 (signed bundles), so cryptography comes from PyPI, whose wheels need a pip newer than 18.04's
python3 -c "import cv2" 2>/dev/null || sudo apt-get install -y python3-opencv
python3 -m pip install --user --upgrade "pip<22"
python3 -m pip install --user "cryptography<41"
python3 -m pip install --user "$SENSORVEIL_SRC"
python3 -c "import tensorrt, pycuda.driver; print('tensorrt', tensorrt.__version__, '+ pycuda ready')"
echo "then: sensorveil export RUN --target jetson-nano --out BUNDLE (on the training machine), copy BUNDLE here, sensorveil run BUNDLE ..."
