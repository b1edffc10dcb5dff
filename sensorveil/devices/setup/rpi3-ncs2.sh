#!/usr/bin/env bash
# sensorveil set-up for the rpi3-ncs2 profile (sensorveil/devices/profiles/rpi3-ncs2.json).
# A Raspberry Pi 3 needs exactly the Pi 4 steps (OpenVINO 2022.3 armhf + NCS2 udev rules);
# the stick runs on the Pi 3's USB 2.0 port, only slower.
set -euo pipefail
exec bash "$(dirname "$0")/rpi4-ncs2.sh" "$@"
