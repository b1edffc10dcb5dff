"""A 180x180 PR-GAN depth bundle for the scripts that time or soak the runtime (not for privacy figures).

    python scripts/depth_bundle.py OUT_DIR      # prints the bundle's path (python -m sensorveil_lab.depth_bundle too)

PR-GAN on a small slice of synthetic depth (4 people, 40 frames each), one epoch, exported to ONNX: the
architecture and input size of the depth bundle, trained just enough to export. Speed and memory do not
depend on the weights, so the slice is kept small: the full 6,400-frame dataset took ~15 minutes to train
here, which is what made CI's soak step run out of time. Reused when OUT_DIR already holds it.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]   # the checkout (lab/sensorveil_lab/ sits two folders down)
SMALL_SLICE = {"n_identities": 4, "samples_per_class": 40}   # 320 frames: seconds to render and train
# one hinge margin and one Laplace baseline instead of the sweeps: the run only has to export
ONE_OF_EACH = {"classifier_epochs": 2, "margin_fractions": (0.2,), "laplace_epsilons": (1.0,), "progress": False}


def depth_bundle(out: Path) -> Path:
    """The bundle's path, built in a child process so the caller (the soak, a timing) never holds torch."""
    bundle = Path(out) / "prgan-depth-bundle"
    if not (bundle / "manifest.json").is_file():
        subprocess.run([sys.executable, "-m", "sensorveil_lab.depth_bundle", str(out)], check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL)
    return bundle


def build(out: Path) -> Path:
    bundle = Path(out) / "prgan-depth-bundle"
    if (bundle / "manifest.json").is_file():
        return bundle
    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    run = train_run("prgan", "synthetic-depth", out=Path(out) / "prgan-depth-run", epochs=1, attacker_epochs=1,
                    dataset_options=SMALL_SLICE, settings=ONE_OF_EACH)
    return export_run(run, "onnx", bundle)


if __name__ == "__main__":
    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else "timing-bundles")))
