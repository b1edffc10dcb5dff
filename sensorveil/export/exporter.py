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

from sensorveil.devices import load_profile
from sensorveil.export.bundle_writer import write_manifest
from sensorveil.export.device_check import plan_for_target
from sensorveil.export.formats import FORMAT_WRITERS
from sensorveil.export.validate import compare, int8_privacy_record, raise_on_failure
from sensorveil.runtime.bundle import MANIFEST_NAME
from sensorveil.sdk import runs
from sensorveil.sdk.training import to_model

FORMATS = tuple(FORMAT_WRITERS)
PRECISIONS = ("fp32", "fp16", "int8")
VALIDATION_SAMPLES = 32
DEFAULT_CALIBRATION = 200   # int8 calibration samples when --calibration is not given


class Exporter:
    def __init__(self, run_dir, out_dir, precision: str = "fp32", include_samples: bool = True,
                 target: str | None = None, calibration: int | None = None, int8_check: bool = True,
                 attacker_epochs: int | None = None):
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; expected one of {PRECISIONS}")
        self.run_dir = Path(run_dir)
        self.run = runs.read_run(run_dir)
        self.model = runs.load_model(run_dir)
        self.out_dir = Path(out_dir)
        self.precision = precision
        # substitution (PASS) bundles: also ship the substitute samples, so output="sample" works
        self.include_samples = include_samples
        self.dataset = runs.load_recorded_dataset(self.run["dataset"])
        self.samples = self._real_samples()
        # --target DEVICE: the profile the writers read constraints from (opset, static shapes, Edge TPU)
        self.target = load_profile(target) if target else None
        self.calibration = calibration or DEFAULT_CALIBRATION
        # int8 changes what the device emits, so its privacy is measured again (validate.int8_privacy_record)
        self.int8_check, self.attacker_epochs = int8_check, attacker_epochs

    def calibration_samples(self) -> np.ndarray:
        """``--calibration N`` real inputs in model units from the training split, never the test
        split the int8 privacy check scores on."""
        pool = self._training_pool()
        pick = np.random.default_rng(1).choice(pool, size=min(self.calibration, len(pool)), replace=False)
        return to_model(self.dataset.subset(np.sort(pick))).numpy()

    def _real_samples(self) -> np.ndarray:
        """Real inputs in model units, for validation and int8 calibration."""
        data = self.dataset
        pick = np.random.default_rng(0).choice(len(data), size=min(VALIDATION_SAMPLES, len(data)), replace=False)
        return to_model(data.subset(np.sort(pick))).numpy()

    def _training_pool(self) -> np.ndarray:
        """Rows outside the run's test slice (rebuilt with prgan.make_slices and the run's seed); all
        rows when the run has no single useful/private pair to rebuild the split from."""
        useful, private = self.run.get("useful"), self.run.get("private")
        if not (isinstance(useful, str) and isinstance(private, str)):
            return np.arange(len(self.dataset))
        from sensorveil.sdk.evaluation import make_slices
        data = self.dataset
        seed = self.run.get("config", {}).get("seed", self.run.get("seed", 0))
        slices = make_slices(data.attributes[useful], data.attributes[private], data.num_classes[private], seed)
        return np.concatenate([indices for name, indices in slices.items() if name != "test"])

    def export(self, fmt: str) -> Path:
        if fmt not in FORMAT_WRITERS:
            raise ValueError(f"unknown export format {fmt!r}; expected one of {FORMATS}")
        if self.out_dir.exists():
            shutil.rmtree(self.out_dir)
        self.out_dir.mkdir(parents=True)
        artifacts = FORMAT_WRITERS[fmt](self)
        write_manifest(self.out_dir, self._write_mechanism_files(), self.run["input"], self.run["output"], artifacts,
                       extra={"dataset": self.run["dataset"], "complexity": self._complexity(),
                              "target": self.target["name"] if self.target else None,
                              "metrics": self._metrics(), "training": self._training()})
        records = [compare(self.out_dir, backend, self.model, self.samples, artifact.get("precision", "fp32"))
                   for backend, artifact in artifacts.items()]
        if self.int8_check:
            records += [int8_privacy_record(self.out_dir, backend, self.run_dir, self.attacker_epochs)
                        for backend, artifact in artifacts.items() if artifact.get("precision") == "int8"]
        self._record_validation(records)
        raise_on_failure(records)
        return self.out_dir

    # -- manifest pieces -----------------------------------------------------------------
    def _write_mechanism_files(self) -> dict:
        """The manifest's mechanism entry; substitution mechanisms first write their bank files."""
        if self.run["mechanism"] in runs.SUBSTITUTION_MECHANISMS:
            from sensorveil.sdk.pass_mechanism import write_bundle_files
            return write_bundle_files(self.run_dir, self.run, self.dataset, self.out_dir, self.include_samples)
        return self._mechanism()

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


def export_run(run_dir, fmt: str | None, out_dir, precision: str | None = None, include_samples: bool = True,
               target: str | None = None, calibration: int | None = None, int8_check: bool = True,
               attacker_epochs: int | None = None) -> Path:
    """``target`` (a device profile) fills in the format and precision the device runs."""
    fmt, precision = plan_for_target(target, fmt, precision)
    return Exporter(run_dir, out_dir, precision, include_samples, target=target, calibration=calibration,
                    int8_check=int8_check, attacker_epochs=attacker_epochs).export(fmt)
