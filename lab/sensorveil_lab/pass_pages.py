"""PASS as its results pages run it (scripts/pass_results.py, pass_federated_results.py,
uji_validation_results.py, prgan_results.py): each dataset's tasks, the privacy goal, and a bundle's runtime row."""
from __future__ import annotations

from pathlib import Path

from sensorveil_lab.shared import SHARED

# dataset -> (useful, private, hidden, data path)
TASKS = {
    "digits": (["parity"], ["lt5"], [], None),
    "ujiindoorloc": (["floor"], ["region"], [], SHARED / "datasets" / "ujiindoorloc.zip"),
    "synthetic-depth": (["facing"], ["identity"], [], None),
}
GOAL_POINTS = 0.05
GOAL_MNAG = 0.5
AUDIT_SEEDS = 3  # as scripts/make_results.py audits PR-GAN's bundles

DESCRIPTIONS = {
    "digits": "scikit-learn's 8x8 handwritten digits",
    "ujiindoorloc": "UJIIndoorLoc Wi-Fi fingerprints",
    "synthetic-depth": "synthetic overhead depth frames",
}


def runtime_row(bundle: Path) -> dict:
    from sensorveil.benchmarks.bench import benchmark_bundle

    row = benchmark_bundle(bundle, backend="onnxruntime", iters=300)["rows"][0]
    keep = ("params", "flops_torch", "flops_onnx", "runtime_p50_ms", "fps", "model_fps", "output_mode")
    return {**{k: row.get(k) for k in keep}, **{k: v for k, v in row.items() if k.startswith("bytes_per_frame")}}
