#!/usr/bin/env bash
# sensorveil set-up for the rpi4-ncs2 profile (sensorveil/devices/profiles/rpi4-ncs2.json).
# Run on the board itself, as a user with sudo. Installs the runtime only: numpy and one
# backend library (no torch, no training dependencies). Re-running is harmless.
set -euo pipefail
# sensorveil is installed from the checkout this script lives in (it is not published on PyPI)
SENSORVEIL_SRC="${SENSORVEIL_SRC:-$(cd "$(dirname "$0")/../../.." && pwd)}"
# The Neural Compute Stick 2 needs the MYRIAD plugin, which OpenVINO dropped after 2022.3 LTS.
# Intel publishes 2022.3 runtime archives for Raspberry Pi OS (armhf) at
#   https://storage.openvinotoolkit.org/repositories/openvino/packages/2022.3/linux/
# Set OPENVINO_ARCHIVE to the downloaded l_openvino_toolkit_debian*_2022.3*_armhf.tgz.
: "${OPENVINO_ARCHIVE:?download the OpenVINO 2022.3 armhf archive and set OPENVINO_ARCHIVE to its path}"
sudo apt-get update
# python3-opencv: camera sources and the camera pipeline; python3-cryptography: signed bundles
sudo apt-get install -y python3-pip python3-numpy libusb-1.0-0 cmake python3-opencv python3-cryptography
sudo mkdir -p /opt/intel/openvino_2022.3
sudo tar -xf "$OPENVINO_ARCHIVE" --strip 1 -C /opt/intel/openvino_2022.3
# udev rules so a normal user can open the stick (vendor 03e7)
sudo usermod -a -G users "$(whoami)"
sudo sh /opt/intel/openvino_2022.3/install_dependencies/install_NCS_udev_rules.sh
echo "source /opt/intel/openvino_2022.3/setupvars.sh" >> ~/.bashrc
source /opt/intel/openvino_2022.3/setupvars.sh
python3 -m pip install --user "$SENSORVEIL_SRC"
python3 -c "import openvino.runtime as ov; print('devices:', ov.Core().available_devices)"
echo "plug the NCS2 in (lsusb shows 03e7:2485); 'MYRIAD' must be listed above"
