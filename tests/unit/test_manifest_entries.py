"""The typed manifest contract: each runtime stage module writes its own manifest entry (the sdk calls
that writer), the entries are the JSON that bundles on disk already hold, and the stage's validator
accepts what its writer writes. No training: these run in a second."""
from __future__ import annotations

import json
import math

import pytest

from sensorveil.runtime import ManifestError
from sensorveil.runtime.stages.attriguard import AttriGuardEntry, AttriGuardStage
from sensorveil.runtime.stages.model import ModelEntry, with_units
from sensorveil.runtime.stages.posterior import PosteriorSampleEntry
from sensorveil.runtime.stages.prgan_med import PRGANMEDEntry
from sensorveil.runtime.stages.sanitizer import SanitizerEntry, SanitizerStage, laplace_scale
from sensorveil.runtime.stages.substitution import SubstitutionEntry

ARRAYS = {"weights": "attriguard_weights.npy", "bias": "attriguard_bias.npy", "target": "attriguard_target.npy"}
MEANING = "cos(f(x), g(x'))/tau per substitute x'"
SUBSTITUTION = {"kind": "substitution", "bank_size": 64, "bank_indices": "bank_indices.npy", "bank_samples": None,
                "bank_colour": None, "output_default": "index", "model_output": "logits",
                "model_output_meaning": MEANING, "bank_indices_meaning": "bank position -> row of the dataset record",
                "cut_out": False}
CAMERA_SUBSTITUTION = dict(SUBSTITUTION, bank_samples="s.npy", bank_colour="c.npy", output_default="sample",
                           cut_out=True, bank_source={"source": "rendered", "real_people": False},
                           condition={"attribute": "direction", "bank_labels": "l.npy"},
                           sequence={"next": "n.npy", "frames_per_step": 3})
OBFUSCATION = {"kind": "sanitizer", "mechanism": "obfuscation", "sensitive_dim": 4, "arrays": {}, "clip_norm": 2.0,
               "sensitivity": 8.0, "laplace_scale": 8.0, "epsilon": 1.0}


@pytest.mark.parametrize("entry, written", [
    (ModelEntry("model"), {"kind": "model", "graph": "model"}),
    (ModelEntry("model", emits="representation"), {"kind": "model", "graph": "model", "emits": "representation"}),
    (PosteriorSampleEntry(16), {"kind": "posterior-sample", "latent_dim": 16}),
    (PRGANMEDEntry("classifier", "generator", "med.npy", 8),
     {"kind": "prgan-med", "classifier": "classifier", "generator": "generator", "med": "med.npy", "noise_dim": 8}),
    (AttriGuardEntry("defender", ARRAYS, 4.0, "modify_add", 1.0, 100),
     {"kind": "attriguard", "graph": "defender", "policy": "modify_add", "beta": 4.0, "tau": 1.0,
      "max_iterations": 100, **ARRAYS}),
    (SanitizerEntry("obfuscation", 4, 2.0, 1.0), OBFUSCATION),
    (SanitizerEntry("generalization", 4, 2.0, 1.0), {"kind": "sanitizer", "mechanism": "generalization",
                                                     "sensitive_dim": 4,
                                                     "arrays": {"centroids": "sanitizer_centroids.npy"}}),
    (SubstitutionEntry(64, "bank_indices.npy", model_output_meaning=MEANING), SUBSTITUTION),
    (SubstitutionEntry(64, "bank_indices.npy", "s.npy", "c.npy", model_output_meaning=MEANING, cut_out=True,
                       bank_source={"source": "rendered", "real_people": False}, condition=("direction", "l.npy"),
                       sequence=("n.npy", 3)), CAMERA_SUBSTITUTION),
])
def test_each_writer_writes_the_json_bundles_on_disk_hold(entry, written):
    assert json.dumps(entry.to_manifest()) == json.dumps(written)     # keys, values and their order


def test_the_exporter_adds_the_units_to_a_model_stage_after_its_keys():
    stage = with_units(ModelEntry("model").to_manifest(), "sensor", "why")
    assert list(stage) == ["kind", "graph", "units", "units_note"] and stage["units"] == "sensor"


def manifest_with(stage, parameters=None) -> dict:
    pipeline = [{"kind": "model", "graph": "encoder"}, stage, {"kind": "model", "graph": "decoder"}]
    return {"files": {}, "pipeline": pipeline, "mechanism": {"kind": "latent", "parameters": parameters or {}}}


def test_the_laplace_scale_is_one_formula_for_the_writer_and_the_validator():
    assert laplace_scale(2.0, 4, 1.0) == OBFUSCATION["laplace_scale"] == 2 * 2.0 * math.sqrt(4) / 1.0
    stage = SanitizerEntry("obfuscation", 4, 2.0, 1.0).to_manifest()
    SanitizerStage.validate_fields("b", "pipeline[1]", stage, manifest_with(stage))


def test_an_old_manifest_with_the_noise_copied_into_its_parameters_still_validates():
    stage = dict(OBFUSCATION)
    parameters = {"latent_dim": 16, "sensitive_dim": 4, "mechanism": "obfuscation", "beta": 1.0, "clip_norm": 2.0,
                  "sensitivity": 8.0, "laplace_scale": 8.0, "epsilon": 1.0, "release": "sample"}
    SanitizerStage.validate_fields("b", "pipeline[1]", stage, manifest_with(stage, parameters))


@pytest.mark.parametrize("where, change", [
    ("parameters", {"laplace_scale": 80.0}), ("parameters", {"epsilon": 0.1}), ("stage", {"sensitivity": 0.8}),
])
def test_a_recorded_copy_of_the_noise_that_disagrees_is_refused(where, change):
    stage = dict(OBFUSCATION, **(change if where == "stage" else {}))
    parameters = dict(OBFUSCATION, **(change if where == "parameters" else {}))
    key = next(iter(change))
    with pytest.raises(ManifestError, match=f"{key} is .*; expected"):
        SanitizerStage.validate_fields("b", "pipeline[1]", stage, manifest_with(stage, parameters))


def test_attriguard_writer_and_validator_agree():
    stage = AttriGuardEntry("defender", ARRAYS, 4.0, "modify_add").to_manifest()
    manifest = {"files": {name: {} for name in ARRAYS.values()}, "artifacts": {"onnxruntime": {"graphs": {
        "defender": {"file": "d.onnx"}}}}, "pipeline": [stage], "mechanism": {}}
    AttriGuardStage.validate_fields("b", "pipeline[0]", stage, manifest)
