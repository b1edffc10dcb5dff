"""The exporter: a trained run in, a verified bundle out.

    export_run("runs/prgan-digits", "onnx", "bundles/prgan-digits")

The run's mechanism (sensorveil.sdk.mechanisms) names the graphs its bundle carries and writes the
arrays its pipeline stages read. Each format is one ``write_<format>`` function that exports one
graph; ``export`` calls it for every graph, writes the manifest (hashes, specs, pipeline, FLOPs,
metrics) and validates every graph through the runtime against torch, the same way for every format.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from sensorveil.devices import load_profile
from sensorveil.export.bundle_writer import write_manifest
from sensorveil.export.device_check import plan_for_target
from sensorveil.export.formats import FORMAT_WRITERS
from sensorveil.export.person_detector import CAMERA_SPEEDS, PERSON_DETECTORS, DetectorJob, add_person_detector
from sensorveil.export.placement import check_out, export_lock, move_into_place, staging_folder
from sensorveil.export.self_test import write_self_test
from sensorveil.export.sensor_units import SensorUnits, UnitsPlan, plan_units
from sensorveil.export.signing import load_private_key, sign_bundle
from sensorveil.export.validate import compare, int8_privacy_record, raise_on_failure
from sensorveil.runtime.bundle import MANIFEST_NAME, SINGLE_GRAPH
from sensorveil.runtime.camera.settings import PASTE_CUT_OUT, PASTE_WINDOW
from sensorveil.runtime.capabilities import PRECISION_ORDER, extra_of_module, formats, formats_writing, precisions_of
from sensorveil.runtime.stages import MODEL_UNITS
from sensorveil.runtime.stages.model import with_units
from sensorveil.sdk import mechanisms
from sensorveil.sdk.evaluation import dataset_slices
from sensorveil.sdk.rundir import load_recorded_dataset, read_run
from sensorveil.sdk.training import to_model

FORMATS = formats()
EXTRA_OF_MODULE = extra_of_module()   # the extra that installs each library a format writer imports
PRECISIONS = PRECISION_ORDER
VALIDATION_SAMPLES = 32
DEFAULT_CALIBRATION = 200   # int8 calibration samples when --calibration is not given


def compared_units(module):
    """How validation reads a graph's outputs: as they are, or, for a module with a
    ``validation_scale`` (PASS's head: logits cos/tau, scale tau), multiplied by it. Float32 rounding
    inside the embedding comes out of the head 1/tau times larger (3.3e-4 at tau = 0.01 on the
    synthetic-depth head, a probability ratio of 1.0003), so the fp32 tolerance is kept in the
    cosines it was meant for."""
    scale = getattr(module, "validation_scale", None)
    return None if scale is None else (lambda y: np.asarray(y, np.float32) * np.float32(scale))


@dataclass
class GraphJob:
    """One graph to export: what a format writer needs and nothing more."""
    name: str
    module: torch.nn.Module
    samples: np.ndarray                      # real inputs of this graph (validation, example shape)
    calibration: Callable[[], np.ndarray]    # int8 calibration inputs of this graph
    out_dir: Path
    precision: str
    target: dict | None
    final_dir: Path | None = None             # where the bundle lands (out_dir is the folder it is written in)

    def file(self, default_name: str) -> str:
        """A one-graph bundle keeps the historic names (model.onnx); others name files by graph."""
        if self.name == SINGLE_GRAPH:
            return default_name
        if default_name.startswith(SINGLE_GRAPH):
            return self.name + default_name[len(SINGLE_GRAPH):]
        return f"{self.name}_{default_name}"


class Exporter:
    def __init__(self, run_dir, out_dir, precision: str = "fp32", include_samples: bool = True,
                 target: str | None = None, calibration: int | None = None, int8_check: bool = True,
                 attacker_epochs: int | None = None, sign_key=None, sensor_units: bool = True,
                 serial: int | None = None, person_detector: str = "ssdlite", camera_speed: str = "recall",
                 force: bool = False):
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; expected one of {PRECISIONS}")
        self.run_dir = Path(run_dir)
        # --out is checked before any work: never the run folder, never a folder holding other things than an
        # earlier bundle unless forced (export.placement); the bundle is written beside it and renamed in
        self.final_dir, self.force = Path(out_dir), force
        check_out(self.final_dir, self.run_dir, force)
        self.run = read_run(run_dir)
        self.mechanism = mechanisms.get(self.run.mechanism)
        if not self.mechanism.exportable:
            raise ValueError(
                f"the {self.mechanism.name} mechanism has no network to export "
                f"({self.mechanism.summary}); evaluate its run instead"
            )
        self.graphs = self.mechanism.graphs(self.run_dir, self.run)
        self.out_dir = self.final_dir     # during export(): the new folder beside final_dir it writes in
        self.precision = precision
        # substitution (PASS) bundles: also ship the substitute samples, so output="sample" works
        self.include_samples = include_samples
        self.dataset = load_recorded_dataset(self.run.dataset)
        self.samples = self._real_samples()
        # --target DEVICE: the profile the writers read constraints from (opset, static shapes, Edge TPU)
        self.target = load_profile(target) if target else None
        self.calibration = calibration or DEFAULT_CALIBRATION
        # int8 changes what the device emits, so its privacy is measured again (validate.int8_privacy_record)
        self.int8_check, self.attacker_epochs = int8_check, attacker_epochs
        # --sign KEY: the key is loaded before any work, so a wrong path fails in a second, not after training
        self.sign_key = load_private_key(sign_key) if sign_key else None
        self.serial = serial  # the signed manifest's rollback serial (None: the Unix time of signing)
        # sensor units inside the graph where the format, precision and pipeline allow (sensor_units.py)
        self.sensor_units = sensor_units
        self.units_plan = UnitsPlan(MODEL_UNITS, "not planned yet")
        # camera bundles: "ssdlite" ships the learned person detector as a graph (export.person_detector),
        # "motion" keeps the motion detector alone
        if person_detector not in PERSON_DETECTORS:
            raise ValueError(f"person detector {person_detector!r}; expected one of {list(PERSON_DETECTORS)}")
        self.person_detector = person_detector
        if camera_speed not in CAMERA_SPEEDS:       # checked before any work, as the detector is
            raise ValueError(f"camera speed {camera_speed!r}; expected one of {list(CAMERA_SPEEDS)}")
        self.camera_speed = camera_speed

    def calibration_samples(self) -> np.ndarray:
        """``--calibration N`` real inputs in model units from the training split, never the test
        split the int8 privacy check scores on."""
        pool = self._training_pool()
        pick = np.random.default_rng(1).choice(pool, size=min(self.calibration, len(pool)), replace=False)
        return to_model(self.dataset.subset(np.sort(pick))).numpy()

    def _real_samples(self) -> np.ndarray:
        """Real inputs in model units, for validation and int8 calibration."""
        return to_model(self._validation_subset()).numpy()

    def _validation_subset(self):
        data = self.dataset
        pick = np.random.default_rng(0).choice(len(data), size=min(VALIDATION_SAMPLES, len(data)), replace=False)
        return data.subset(np.sort(pick))

    def _sensor_samples(self, module: SensorUnits) -> np.ndarray:
        """The same real inputs as ``samples``, in sensor units and the model's layout: what a graph with
        the units inside takes (validation, the writers' example)."""
        return module.sensor_samples(self._validation_subset().x.reshape(self.samples.shape))

    def _training_pool(self) -> np.ndarray:
        """Rows outside the run's test slice (rebuilt with dataset_slices and the run's seed); all rows
        when the run has no single useful/private pair to rebuild the split from."""
        useful, private = self.run.useful, self.run.private
        useful, private = (
            useful[0] if isinstance(useful, list) and len(useful) == 1 else useful,
            private[0] if isinstance(private, list) and len(private) == 1 else private,
        )
        if not (isinstance(useful, str) and isinstance(private, str)):
            return np.arange(len(self.dataset))
        data = self.dataset
        seed = (self.run.config or {}).get("seed", self.run.seed)
        slices = dataset_slices(data, useful, private, seed)   # calibration never draws a test row
        return np.concatenate([indices for name, indices in slices.items() if name != "test"])

    def graph_inputs(self, name: str, model_inputs: np.ndarray) -> np.ndarray:
        """What graph ``name`` receives for these bundle inputs: the inputs themselves, or the
        output of the graph that feeds it (a decoder gets its encoder's latents), or what the mechanism
        says a numpy stage feeds it (``Graph.inputs``)."""
        if self.graphs[name].inputs is not None:
            return self.graphs[name].inputs(model_inputs)
        source = self.graphs[name].input_from
        if source is None:
            return model_inputs
        with torch.no_grad():
            upstream = torch.from_numpy(self.graph_inputs(source, model_inputs))
            return self.graphs[source].module.eval()(upstream).numpy()

    def job(self, name: str) -> GraphJob:
        module, samples = self.exported_module(name)
        return GraphJob(
            name=name,
            module=module,
            samples=samples,
            calibration=lambda: self.graph_inputs(name, self.calibration_samples()),
            out_dir=self.out_dir,
            precision=self.precision,
            target=self.target,
            final_dir=self.final_dir,
        )

    def exported_module(self, name: str) -> tuple:
        """(the module the file is exported from, its real inputs): the graph itself in model units, or
        wrapped with the sensor units when the plan puts them in the graph."""
        module = self.graphs[name].module.eval()
        if not self.units_plan.in_graph:
            return module, self.graph_inputs(name, self.samples)
        wrapped = SensorUnits(module, self.run.input, self.run.output, self.units_plan).eval()
        return wrapped, self._sensor_samples(wrapped)

    def export(self, fmt: str) -> Path:
        """Write and validate the bundle in a new folder beside ``--out`` and rename it into place; on any
        failure that folder is removed and ``--out`` is left as it was (a half-written or failed bundle must
        never be mistaken for a deployable one, and an earlier bundle is only replaced by a whole one)."""
        if fmt not in FORMAT_WRITERS:
            raise ValueError(f"unknown export format {fmt!r}; expected one of {FORMATS}")
        if self.precision not in precisions_of(fmt):
            raise ValueError(f"the {fmt} format is exported in {' or '.join(precisions_of(fmt))}; use --format "
                             f"{' or '.join(formats_writing(self.precision))} for {self.precision} "
                             "(sensorveil devices formats)")
        with export_lock(self.final_dir):
            check_out(self.final_dir, self.run_dir, self.force)   # again, now that no other export can write
            self.out_dir = staging_folder(self.final_dir)
            try:
                self._export(fmt)
                move_into_place(self.out_dir, self.final_dir)
            except ModuleNotFoundError as error:
                shutil.rmtree(self.out_dir, ignore_errors=True)
                raise ValueError(self._missing_library(fmt, error)) from None
            except BaseException:
                shutil.rmtree(self.out_dir, ignore_errors=True)
                raise
            finally:
                self.out_dir = self.final_dir
        return self.final_dir

    def _missing_library(self, fmt: str, error: ModuleNotFoundError) -> str:
        module = (error.name or "").split(".")[0]
        extra = EXTRA_OF_MODULE.get(module, "all")
        message = (
            f"exporting to {fmt} needs the Python package {module!r}, which is not installed here; "
            f"install it with: pip install '.[{extra}]' (from the sensorveil checkout)"
        )
        if self.target:
            message += (
                f"; the {self.target['name']} board itself is set up with "
                f"sensorveil/devices/{self.target['setup_script']}"
            )
        return message

    def _camera(self, pipeline: list, artifacts: dict) -> dict:
        """The manifest's camera entry for a bundle trained on people crops: the dataset's, "cut-out"
        pasting where the bank's substitutes are people cut out of their crops, and the learned person
        detector's graph copied into the bundle (``artifacts`` gains it) unless the export asked for motion."""
        camera = getattr(self.dataset, "camera", None)
        if not camera:
            return {}
        cut_out = any(stage.get("cut_out") for stage in pipeline)
        # the bank's provenance is the substitution stage's (its bank_source), not the camera's
        paste = PASTE_CUT_OUT if cut_out else PASTE_WINDOW
        entry = {**{k: v for k, v in camera.items() if k != "bank"}, "paste": paste}
        if self.person_detector == "ssdlite":
            clip = self.run.dataset.path
            job = DetectorJob(self.out_dir, self.precision, clip, speed=self.camera_speed, final_dir=self.final_dir)
            entry.update(add_person_detector(artifacts, job))
        return {"camera": entry}

    def _export(self, fmt: str) -> Path:
        # the pipeline first: whether the units can go in the graph depends on its stages
        mechanism, pipeline = self.mechanism.bundle(
            self.run_dir, self.run, self.dataset, self.out_dir, self.include_samples
        )
        self.units_plan = plan_units(
            fmt, self.precision, self.target, pipeline, self.run.input, self.run.output, enabled=self.sensor_units
        )
        pipeline = self._with_units(pipeline)
        artifacts = self._write_graphs(fmt)
        camera = self._camera(pipeline, artifacts)    # before the manifest: it may add the detector's file
        write_manifest(
            self.out_dir,
            mechanism,
            self.run.input,
            self.run.output,
            artifacts,
            extra={
                "pipeline": pipeline,
                "dataset": self.run.dataset.to_json(),
                "complexity": self._complexity(artifacts),
                "target": self.target["name"] if self.target else None,
                "metrics": self._metrics(),
                "training": self._training(),
                **camera,
            },
        )
        records = [
            self._compare(backend, name, artifact.get("precision", "fp32"))
            for backend, artifact in artifacts.items()
            for name in artifact["graphs"]
            if name in self.graphs    # the trained graphs; the person detector is checked when converted
        ]
        if self.int8_check and self.mechanism.int8_privacy_check:
            records += [
                int8_privacy_record(self.out_dir, backend, self.run_dir, self.attacker_epochs)
                for backend, artifact in artifacts.items()
                if artifact.get("precision") == "int8"
            ]
        self._record_validation(records)
        raise_on_failure(records)
        write_self_test(self.out_dir, self._validation_subset().x)     # after validation passed, before signing
        if self.sign_key is not None:  # last: the signature covers the manifest as it is finally written
            sign_bundle(self.out_dir, self.sign_key, serial=self.serial)
        return self.out_dir

    def _with_units(self, pipeline: list) -> list:
        """A one-model pipeline's stage says which side maps the units, and why (int8 keeps them in the
        runtime for the Edge TPU's sake); the stages of longer pipelines all work in model units."""
        if len(pipeline) != 1 or pipeline[0].get("kind") != "model":
            return pipeline
        return [with_units(pipeline[0], self.units_plan.units, self.units_plan.note)]

    def _compare(self, backend: str, name: str, precision: str) -> dict:
        """One graph of the bundle against the module it was exported from; with the units in the graph,
        the difference is read in model units, with one sensor step of slack for integer sensors
        (a float32 difference can flip a rounding)."""
        module, samples = self.exported_module(name)
        if not self.units_plan.in_graph:
            return compare(
                self.out_dir, backend, name, module, samples, precision, to_model_units=compared_units(module)
            )
        out = module.out
        return compare(
            self.out_dir,
            backend,
            name,
            module,
            samples,
            precision,
            to_model_units=lambda y: (y.astype(np.float32) - out.offset) / out.scale,
            rounding_step=1.0 / out.scale if module.round_output else 0.0,
        )

    def _write_graphs(self, fmt: str) -> dict:
        """Every graph through the format's writer; per backend, the shared keys once and each
        graph's own keys under ``graphs``."""
        artifacts = {}
        for name in self.graphs:
            for backend, (shared, graph) in FORMAT_WRITERS[fmt](self.job(name)).items():
                artifacts.setdefault(backend, {**shared, "graphs": {}})["graphs"][name] = graph
        return artifacts

    # -- manifest pieces -----------------------------------------------------------------
    def _complexity(self, artifacts: dict) -> dict:
        """FLOPs and params summed over the bundle's graphs, from torch and from the ONNX files."""
        from sensorveil.costs.onnx_counts import onnx_flops, onnx_params
        from sensorveil.costs.torch_counts import torch_flops, torch_params

        record = {"params": 0, "flops_torch": 0}
        for name, graph in self.graphs.items():
            example = torch.from_numpy(self.graph_inputs(name, self.samples[:1]))
            record["params"] += torch_params(graph.module)
            record["flops_torch"] += torch_flops(graph.module, example)
        onnx_files = [entry["file"] for name, entry in artifacts.get("onnxruntime", {}).get("graphs", {}).items()
                      if name in self.graphs]   # the mechanism's graphs: a camera's detector is counted apart
        if onnx_files:
            record.update(
                flops_onnx=sum(onnx_flops(self.out_dir / f)["total"] for f in onnx_files),
                params_onnx=sum(onnx_params(self.out_dir / f) for f in onnx_files),
            )
        if len(self.graphs) > 1:
            record["graphs"] = list(self.graphs)
        return record

    def _metrics(self) -> dict:
        return {
            **(self.run.reference or {}),
            **(self.run.metrics or {}),
            "threshold_met": (self.run.selection or {}).get("threshold_met"),
        }

    def _training(self) -> dict:
        return {"run": str(self.run_dir), "seed": self.run.seed, "config": self.run.config}

    def _record_validation(self, records: list[dict]) -> None:
        # manifest.json is not among the hashed files, so adding the validation record keeps it valid
        path = self.out_dir / MANIFEST_NAME
        manifest = json.loads(path.read_text())
        manifest["validation"] = records
        # the manifest's figures are this artefact's own: an int8 bundle's come from its own audit;
        # fp32/fp16 artefacts emit what the trained model emits (within the validation tolerance,
        # with the sensor's value grid part of training), so the run's figures are theirs
        audited = [r for r in records if r.get("precision") == "int8" and "int8" in r]
        if audited:
            manifest["metrics"].update(audited[0]["int8"])
            manifest["metrics_source"] = f"audit of this int8 bundle on {audited[0]['backend']}"
        else:
            manifest["metrics_source"] = "the training run (this artefact matches the trained model, see validation)"
        path.write_text(json.dumps(manifest, indent=2))


def export_run(run_dir, fmt: str | None, out_dir, precision: str | None = None, target: str | None = None,
               **options) -> Path:
    """``target`` (a device profile) fills in the format and precision the device runs. ``options`` are the
    Exporter's: ``sign_key`` (an Ed25519 private key PEM file) signs the manifest, with rollback ``serial``
    (default: the Unix time); ``force=True`` lets ``out_dir`` replace a folder that is not an earlier bundle
    (never the run folder); ``sensor_units=False`` keeps the normalization in the runtime even where the
    graph could take it (sensor_units.py says where it cannot); include_samples, calibration, int8_check,
    attacker_epochs."""
    fmt, precision = plan_for_target(target, fmt, precision)
    return Exporter(run_dir, out_dir, precision, target=target, **options).export(fmt)
