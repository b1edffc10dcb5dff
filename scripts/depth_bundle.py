"""A 180x180 PR-GAN depth bundle for the scripts that time or soak the runtime (not for privacy figures).

    python scripts/depth_bundle.py OUT_DIR      # prints the bundle's path

One epoch of PR-GAN on synthetic depth, exported to ONNX: the architecture and input size of the depth
bundle, trained just enough to export. Reused when OUT_DIR already holds it.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def depth_bundle(out: Path) -> Path:
    bundle = Path(out) / "prgan-depth-bundle"
    if (bundle / "manifest.json").is_file():
        return bundle
    run = Path(out) / "prgan-depth-run"
    for argv in (["train", "prgan", "--dataset", "synthetic-depth", "--epochs", "1", "--classifier-epochs", "2",
                  "--attacker-epochs", "1", "--out", str(run)],
                 ["export", str(run), "--format", "onnx", "--out", str(bundle)]):
        subprocess.run([sys.executable, "-m", "sensorveil", *argv], check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return bundle


if __name__ == "__main__":
    print(depth_bundle(Path(sys.argv[1] if len(sys.argv) > 1 else "timing-bundles")))
