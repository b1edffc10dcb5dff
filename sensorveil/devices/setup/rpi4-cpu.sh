#!/usr/bin/env bash
# sensorveil set-up for the rpi4-cpu profile (sensorveil/devices/profiles/rpi4-cpu.json):
# Raspberry Pi 4 B on Raspberry Pi OS Bookworm, 64-bit, inference on its Cortex-A72 CPU. Run on the board.
# The Pi 4 needs exactly the Pi 5's steps (a virtual environment SENSORVEIL_VENV, default ~/.sensorveil,
# with the checkout, numpy, onnxruntime and LiteRT; no torch), so this runs rpi5-cpu.sh, which
# scripts/device_matrix.py checks in an emulated Bookworm. Re-running is harmless.
set -euo pipefail
exec bash "$(dirname "$0")/rpi5-cpu.sh" "$@"
