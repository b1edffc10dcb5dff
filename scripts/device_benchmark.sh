#!/usr/bin/env sh
# Device benchmark: run it unchanged on the board, next to a bundle.
#
#   scripts/device_benchmark.sh BUNDLE [SOURCE] [FRAMES] [REPORT_DIR]
#   scripts/device_benchmark.sh prgan-depth-bundle kinect
#   scripts/device_benchmark.sh prgan-depth-bundle camera:0 300
#
# SOURCE defaults to camera:0 (kinect, k4a, k4a:REC.mkv, depthdir:PATH, a video file, ...).
# Measures every backend the bundle carries whose library is installed (`--backend all`):
# model-only latency and FPS, end-to-end stream FPS with the capture / preprocess / inference /
# postprocess split, peak memory, and ESTIMATES for the profiled devices (labelled as such).
# The report is REPORT_DIR/DEVICE-YYYYmmdd-HHMMSS.{json,md} (default REPORT_DIR: reports), and .png where
# matplotlib is installed, DEVICE being the detected device profile (sensorveil.devices.detect) or the platform.
set -eu

if [ "$#" -lt 1 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
BUNDLE=$1
SOURCE=${2:-camera:0}
FRAMES=${3:-300}
REPORT_DIR=${4:-reports}
PYTHON=${PYTHON:-python3}

# the same as: sensorveil benchmark BUNDLE --backend all --source SOURCE --frames FRAMES --device-report REPORT_DIR
"$PYTHON" -m sensorveil benchmark "$BUNDLE" --backend all --source "$SOURCE" --frames "$FRAMES" \
    --device-report "$REPORT_DIR"
