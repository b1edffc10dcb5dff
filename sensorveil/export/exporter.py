"""The exporter: a trained run in, a verified bundle out.

    export_run("runs/prgan-digits", "onnx", "bundles/prgan-digits")

Each format is one ``export_<format>`` method that writes its artefact and returns the
manifest entries for it; ``export`` then writes the manifest (hashes, specs, FLOPs, metrics)
and validates each artefact through the runtime against torch.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch

from sensorveil.export.bundle_writer import write_manifest
from sensorveil.export.formats import FORMAT_WRITERS
from sensorveil.export.validate import compare, raise_on_failure
from sensorveil.runtime.bundle import MANIFEST_NAME
from sensorveil.sdk import runs
from sensorveil.sdk.training import to_model

FORMATS = tuple(FORMAT_WRITERS)
PRECISIONS = ("fp32", "fp16", "int8")
VALIDATION_SAMPLES = 32


class Exporter:
    def __init__(self, run_dir, out_dir, precision: str = "fp32"):
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; expected one of {PRECISIONS}")
        self.run_dir = Path(run_dir)
        self.run = runs.read_run(run_dir)
        self.model = runs.load_generator(run_dir)
        self.out_dir = Path(out_dir)
        self.precision = precision
        self.samples = self._real_samples()

    def _real_samples(self) -> np.ndarray:
        """Real inputs in model units, for validation and int8 calibration."""
        data = runs.load_recorded_dataset(self.run["dataset"])
        pick = np.random.default_rng(0).choice(len(data), size=min(VALIDATION_SAMPLES, len(data)), replace=False)
        return to_model(data.subset(np.sort(pick))).numpy()

    def export(self, fmt: str) -> Path:
        if fmt not in FORMAT_WRITERS:
            raise ValueError(f"unknown export format {fmt!r}; expected one of {FORMATS}")
        if self.out_dir.exists():
            shutil.rmtree(self.out_dir)
        self.out_dir.mkdir(parents=True)
        artifacts = FORMAT_WRITERS[fmt](self)
        write_manifest(self.out_dir, self._mechanism(), self.run["input"], self.run["output"], artifacts,
                       extra={"dataset": self.run["dataset"], "complexity": self._complexity(),
                              "metrics": self._metrics(), "training": self._training()})
        records = [compare(self.out_dir, backend, self.model, self.samples, artifact.get("precision", "fp32"))
                   for backend, artifact in artifacts.items()]
        self._record_validation(records)
        raise_on_failure(records)
        return self.out_dir

    # -- manifest pieces -----------------------------------------------------------------
    def _mechanism(self) -> dict:
        selection = self.run.get("selection", {})
        return {"name": self.run["mechanism"], "kind": "perturbation",
                "useful": self.run["useful"], "private": self.run["private"],
                "parameters": {"margin_c": selection.get("margin_c"), **{
                    key: self.run["config"][key] for key in ("alpha", "beta", "utility_threshold")}}}

    def _complexity(self) -> dict:
        from sensorveil.benchmarks.flops import onnx_flops, onnx_params, torch_flops, torch_params
        example = torch.from_numpy(self.samples[:1])
        record = {"params": torch_params(self.model), "flops_torch": torch_flops(self.model, example)}
        onnx_path = self.out_dir / "model.onnx"
        if onnx_path.exists():
            record.update(flops_onnx=onnx_flops(onnx_path)["total"], params_onnx=onnx_params(onnx_path))
        return record

    def _metrics(self) -> dict:
        return {**self.run.get("reference", {}), **self.run.get("metrics", {}),
                "threshold_met": self.run.get("selection", {}).get("threshold_met")}

    def _training(self) -> dict:
        return {"run": str(self.run_dir), "seed": self.run.get("seed"), "config": self.run.get("config")}

    def _record_validation(self, records: list[dict]) -> None:
        # manifest.json is not among the hashed files, so adding the validation record keeps it valid
        path = self.out_dir / MANIFEST_NAME
        manifest = json.loads(path.read_text())
        manifest["validation"] = records
        path.write_text(json.dumps(manifest, indent=2))


def export_run(run_dir, fmt: str, out_dir, precision: str = "fp32") -> Path:
    return Exporter(run_dir, out_dir, precision).export(fmt)
