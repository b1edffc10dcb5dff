#!/usr/bin/env bash
# sensorveil set-up for the jetson-orin-nano profile (sensorveil/devices/profiles/jetson-orin-nano.json).
# Run on the board itself, as a user with sudo. Installs the runtime only: numpy and one
# backend library (no torch, no training dependencies). Re-running is harmless.
set -euo pipefail
# sensorveil is installed from the checkout this script lives in (it is not published on PyPI)
SENSORVEIL_SRC="${SENSORVEIL_SRC:-$(cd "$(dirname "$0")/../../.." && pwd)}"
# JetPack 6.x ships TensorRT 10.3 and CUDA 12.6; nvidia-jetpack pulls python3-libnvinfer.
if [ ! -f /etc/nv_tegra_release ]; then echo "not a Jetson (no /etc/nv_tegra_release); flash JetPack 6.x first" >&2; exit 1; fi
sudo apt-get update
sudo apt-get install -y python3-pip nvidia-jetpack python3-libnvinfer
python3 -m pip install --user "cuda-python>=12,<13" numpy opencv-python-headless cryptography "$SENSORVEIL_SRC"
python3 -c "import tensorrt; from cuda import cudart; print('tensorrt', tensorrt.__version__, '+ cuda-python ready')"
