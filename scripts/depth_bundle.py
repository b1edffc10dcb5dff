"""A 180x180 PR-GAN depth bundle for the scripts that time or soak the runtime (not for privacy figures).

    python scripts/depth_bundle.py OUT_DIR      # prints the bundle's path

The bundle and how it is made: sensorveil_lab.depth_bundle (the timing and soak scripts import it from there).
"""
import sys
from pathlib import Path

from sensorveil_lab.depth_bundle import build

if __name__ == "__main__":
    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else "timing-bundles")))
