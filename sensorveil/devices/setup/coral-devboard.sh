#!/usr/bin/env bash
# sensorveil set-up for the coral-devboard profile (sensorveil/devices/profiles/coral-devboard.json).
# Mendel Linux already lists Coral's apt repository and libedgetpu; the USB Accelerator steps
# are idempotent there and add the LiteRT interpreter and sensorveil.
set -euo pipefail
exec bash "$(dirname "$0")/coral-usb.sh" "$@"
