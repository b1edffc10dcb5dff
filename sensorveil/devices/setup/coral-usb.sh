#!/usr/bin/env bash
# sensorveil set-up for the coral-usb profile (sensorveil/devices/profiles/coral-usb.json); coral-devboard.sh
# runs it on Mendel Linux. Run on the board itself, as a user with sudo. Installs the runtime only: numpy,
# one backend library (LiteRT with the Edge TPU delegate), OpenCV (camera sources and the camera pipeline)
# and cryptography (signed bundles); no torch, no training dependencies. Re-running is harmless.
# Bookworm's pip refuses to install into the system Python (PEP 668, "externally-managed-environment"), so
# the runtime gets its own virtual environment, SENSORVEIL_VENV (default ~/.sensorveil), as on the Pi
# (rpi5-cpu.sh). numpy, OpenCV and cryptography come from apt (no pip wheels for Mendel's Python 3.7 on arm64
# are needed) and the environment sees them (--system-site-packages); use its python3.
set -euo pipefail
# sensorveil is installed from the checkout this script lives in (it is not published on PyPI)
SENSORVEIL_SRC="${SENSORVEIL_SRC:-$(cd "$(dirname "$0")/../../.." && pwd)}"
SENSORVEIL_VENV="${SENSORVEIL_VENV:-$HOME/.sensorveil}"
# Edge TPU runtime (libedgetpu) from Coral's apt repository (Mendel lists it already; adding it again is harmless)
echo "deb https://packages.cloud.google.com/apt coral-edgetpu-stable main" | sudo tee /etc/apt/sources.list.d/coral-edgetpu.list
curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | sudo gpg --dearmor --yes -o /etc/apt/trusted.gpg.d/coral-edgetpu.gpg
sudo apt-get update
sudo apt-get install -y libedgetpu1-std python3-venv python3-pip python3-numpy python3-opencv python3-cryptography
python3 -m venv --system-site-packages "$SENSORVEIL_VENV"
# ai-edge-litert where a wheel exists for this Python; the older tflite-runtime otherwise (Mendel's 3.7)
"$SENSORVEIL_VENV/bin/python3" -m pip install ai-edge-litert || "$SENSORVEIL_VENV/bin/python3" -m pip install tflite-runtime
"$SENSORVEIL_VENV/bin/python3" -m pip install "$SENSORVEIL_SRC"
"$SENSORVEIL_VENV/bin/python3" -c "import ctypes, cv2, cryptography; ctypes.CDLL('libedgetpu.so.1'); \
print('libedgetpu ready; opencv', cv2.__version__, 'cryptography', cryptography.__version__)"
echo "the runtime's Python: $SENSORVEIL_VENV/bin/python3 (PYTHON=$SENSORVEIL_VENV/bin/python3 scripts/device_benchmark.sh BUNDLE)"
# the Edge TPU model is compiled on an x86-64 Debian/Ubuntu workstation, never on the board:
echo "Edge TPU models are compiled on an x86-64 Debian/Ubuntu workstation: at export where edgetpu_compiler is" \
    "installed, or afterwards there with: sensorveil devices compile BUNDLE --sign keys/signer.key"
