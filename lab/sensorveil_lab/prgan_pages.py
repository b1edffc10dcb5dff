"""PR-GAN as the results pages run it (scripts/make_results.py, prgan_results.py, med_results.py,
uji_validation_results.py): the paper's Table 2, the settings of section 6.4, and the pages' saved figures."""
from __future__ import annotations

import json
from pathlib import Path

from sensorveil.sdk import runs
from sensorveil.sdk.mechanisms import prgan
from sensorveil_lab.provenance import portable
from sensorveil_lab.shared import SHARED

# PR-GAN Table 2 (Acc(D_z) %, lower is better), quoted from the paper for comparison.
PAPER_TABLE2 = {
    "digits": {"paper_dataset": "MNIST", "prgan": 65.3, "ngp": 67.2, "ap": 67.1, "laplace": 80.6,
               "random_star": 60.0, "original_acc_private": 98.4, "original_acc_useful": 99.2},
    # our depth frames are SYNTHETIC (sensorveil's generator), not OccuTherm's: compare shapes, not values
    "synthetic-depth": {"paper_dataset": "OccuTherm (real depth; ours is synthetic)", "prgan": 3.6, "ngp": 7.2,
                        "ap": 23.6, "laplace": 37.6, "random_star": 5.0, "original_acc_private": 99.8,
                        "original_acc_useful": 99.95},
    "ujiindoorloc": {"paper_dataset": "WiFi", "prgan": 23.6, "ngp": 31.3, "ap": 37.7, "laplace": 50.0,
                     "random_star": 12.5, "original_acc_private": 84.6, "original_acc_useful": 92.6},
}
AUDIT_SEEDS = 3      # the deployed bundle's attackers are repeated over seeds for their intervals
DEPTH_MARGINS = (0.2, 0.5)


def datasets_of(saved) -> list[dict]:
    """docs/results.json's per-dataset figures: {"provenance", "datasets"}, or the bare list it was before."""
    return saved["datasets"] if isinstance(saved, dict) else saved


def prgan_config(name: str, args) -> prgan.PRGANConfig:
    """Section 6.4's setting for ``name``: its Acc(D_y) threshold (0.95 for images, 0.75 for WiFi), eq. 11's
    alpha and beta, and the sweep of eq. 10's hinge margin c that the threshold chooses from."""
    config = prgan.default_config(name, runs.DEFAULT_TASKS[name][2])
    if name == "synthetic-depth":   # fewer margins for the 180x180 generator, as make_results sweeps them
        config.margin_fractions = tuple(DEPTH_MARGINS)
    config.epochs = args.epochs or config.epochs
    config.classifier_epochs = args.classifier_epochs or config.classifier_epochs
    return config


def without_machine_paths(results: dict, out: Path) -> dict:
    """The JSON with --out written as <out> and the checkout, shared files and temporary folders made portable."""
    text = json.dumps(results, default=str)
    for path in sorted({str(out.resolve()), str(out)}, key=len, reverse=True):
        if path not in ("", "."):
            text = text.replace(json.dumps(path)[1:-1], "<out>")
    return portable(json.loads(text), shared=SHARED)

