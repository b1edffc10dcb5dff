#!/usr/bin/env bash
# sensorveil set-up for the coral-usb profile (sensorveil/devices/profiles/coral-usb.json).
# Run on the board itself, as a user with sudo. Installs the runtime only: numpy and one
# backend library (no torch, no training dependencies). Re-running is harmless.
set -euo pipefail
# sensorveil is installed from the checkout this script lives in (it is not published on PyPI)
SENSORVEIL_SRC="${SENSORVEIL_SRC:-$(cd "$(dirname "$0")/../../.." && pwd)}"
# Edge TPU runtime (libedgetpu) from Coral's apt repository, then a LiteRT interpreter.
echo "deb https://packages.cloud.google.com/apt coral-edgetpu-stable main" | sudo tee /etc/apt/sources.list.d/coral-edgetpu.list
curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | sudo gpg --dearmor -o /etc/apt/trusted.gpg.d/coral-edgetpu.gpg
sudo apt-get update
# python3-opencv: camera sources and the camera pipeline; python3-cryptography (2.6 on Mendel): signed bundles
sudo apt-get install -y libedgetpu1-std python3-pip python3-numpy python3-opencv python3-cryptography
# ai-edge-litert where a wheel exists for this Python; the older tflite-runtime otherwise.
python3 -m pip install --user ai-edge-litert || python3 -m pip install --user tflite-runtime
python3 -m pip install --user "$SENSORVEIL_SRC"
python3 -c "import ctypes; ctypes.CDLL('libedgetpu.so.1'); print('libedgetpu ready')"
# Models must be compiled for the Edge TPU; the compiler runs on an x86-64 Debian/Ubuntu host:
echo "on an x86-64 host: sudo apt-get install edgetpu-compiler && edgetpu_compiler -s -o BUNDLE BUNDLE/model_int8.tflite"
