"""ONNX export: checker, manifest, hashes, complexity, and agreement with torch through the runtime."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch

from sensorveil.runtime import Privatizer
from sensorveil.runtime.bundle import sha256_of


@pytest.mark.exports
@pytest.mark.trains
def test_manifest_lists_every_file_with_its_hash(digits_bundle):
    manifest = json.loads((digits_bundle / "manifest.json").read_text())
    [stage] = manifest["pipeline"]
    assert manifest["schema_version"] == 2 and (stage["kind"], stage["graph"], stage["units"]) == (
        "model",
        "model",
        "sensor",
    )
    for name, record in manifest["files"].items():
        assert sha256_of(digits_bundle / name) == record["sha256"]
        assert (digits_bundle / name).stat().st_size == record["size"]
    assert manifest["input"]["normalization"] == {"offset": 0.0, "scale": 16.0}
    assert manifest["input"]["sample_shape"] == [8, 8]
    assert manifest["mechanism"]["name"] == "prgan" and manifest["mechanism"]["kind"] == "perturbation"
    for key in ("probing_acc_private", "protocol_acc_private", "random_star", "original_acc_private"):
        assert key in manifest["metrics"]


@pytest.mark.exports
@pytest.mark.trains
def test_flops_from_checkpoint_and_from_graph_agree(digits_bundle):
    complexity = json.loads((digits_bundle / "manifest.json").read_text())["complexity"]
    assert complexity["flops_torch"] == complexity["flops_onnx"] > 0
    assert complexity["params"] == complexity["params_onnx"] > 0


@pytest.mark.exports
@pytest.mark.trains
def test_export_is_validated_against_torch(digits_bundle, digits_run):
    manifest = json.loads((digits_bundle / "manifest.json").read_text())
    [record] = manifest["validation"]
    assert record["status"] == "passed" and record["max_abs_diff"] <= 1e-4
    onnx.checker.check_model(onnx.load(str(digits_bundle / "model.onnx")))
    # independently of the exporter's own check: the runtime's full sensor-unit path vs torch
    from sensorveil.sdk import mechanisms
    from sensorveil.sdk.runs import read_run

    G = mechanisms.get("prgan").graphs(digits_run, read_run(digits_run))["model"].module
    x = np.random.default_rng(2).uniform(0, 16, size=(16, 8, 8)).astype(np.float32)
    with torch.no_grad():
        expected = G(torch.from_numpy(x / 16.0)[:, None]).numpy()[:, 0] * 16.0
    np.testing.assert_allclose(Privatizer.load(digits_bundle)(x), expected, atol=16 * 1e-4)


@pytest.mark.exports
@pytest.mark.trains
def test_uji_vector_bundle_round_trip(uji_zip, tmp_path):
    from sensorveil.export import export_run
    from tests.conftest import tiny_run

    run = tiny_run(tmp_path / "run", "ujiindoorloc", data_path=str(uji_zip), dataset_options={"max_rows": 600})
    bundle = export_run(run, "onnx", tmp_path / "bundle")
    p = Privatizer.load(bundle)
    heard = (np.random.default_rng(0).random((3, 520)) < 0.05).astype(np.uint8)
    out = p(heard)
    assert out.shape == (3, 520) and out.dtype == np.uint8 and set(np.unique(out)) <= {0, 1}


@pytest.mark.exports
@pytest.mark.trains
def test_unknown_format_and_precision_are_clear_errors(digits_run, tmp_path):
    from sensorveil.export import export_run

    with pytest.raises(ValueError, match="unknown export format 'pb'"):
        export_run(digits_run, "pb", tmp_path / "b")
    with pytest.raises(ValueError, match="fp32"):
        export_run(digits_run, "onnx", tmp_path / "b", precision="fp16")


@pytest.mark.exports
@pytest.mark.trains
def test_missing_export_library_is_one_error_and_leaves_no_bundle(digits_run, tmp_path, monkeypatch, capsys):
    """What a user of the README's first install (.[train,onnx]) meets on `export --target coral-usb`."""
    import sys

    from sensorveil.cli import main

    monkeypatch.setitem(sys.modules, "litert_torch", None)  # as if the package were not installed
    out = tmp_path / "coral"
    assert main(["export", str(digits_run), "--target", "coral-usb", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "litert_torch" in error[0] and "[export-tflite]" in error[0]
    assert "sensorveil/devices/setup/coral-usb.sh" in error[0]
    assert not out.exists()


@pytest.mark.exports
@pytest.mark.trains
def test_binary_sensor_bundle_privatizes_as_the_run_measured(uji_zip, tmp_path):
    """PR-GAN trains through the WiFi scan's 0/1 values (straight-through rounding), so the fixed
    D_z scores the deployed bundle exactly as it scored the trained generator."""
    from sensorveil.export import export_run
    from sensorveil.sdk.assess import evaluate_bundle
    from sensorveil.sdk.runs import read_run
    from tests.conftest import tiny_run

    run_dir = tiny_run(tmp_path / "run", "ujiindoorloc", data_path=str(uji_zip), dataset_options={"max_rows": 600})
    bundle = export_run(run_dir, "onnx", tmp_path / "bundle")
    device = evaluate_bundle(bundle, attacker_epochs=1)
    trained = read_run(run_dir)["metrics"]
    for key in ("protocol_acc_private", "protocol_acc_useful", "distortion_l2"):
        assert device[key] == pytest.approx(trained[key], abs=1e-6), key


def test_snapping_rounds_forward_and_passes_gradients_straight_through():
    from sensorveil.sdk.training import sensor_step, snap_to_sensor

    assert sensor_step({"dtype": "uint8", "normalization": {"scale": 1.0}}) == 1.0
    assert sensor_step({"dtype": "float32", "normalization": {"scale": 16.0}}) == 0.0
    y = torch.tensor([0.2, 0.49, 0.51, 0.9], requires_grad=True)
    snapped = snap_to_sensor(y, 1.0)
    assert snapped.tolist() == [0.0, 0.0, 1.0, 1.0]
    (snapped * torch.arange(4.0)).sum().backward()
    assert y.grad.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_pass_logits_are_validated_as_cosines_and_generators_as_they_are():
    """PASS's head emits cos/tau (tau = 0.01): float32 rounding of 3.3e-6 in the cosine reaches the
    logits as 3.3e-4, above the fp32 tolerance, though the draw's probabilities move by 0.03%. The
    export compares those logits times tau; a module without validation_scale is compared as is."""
    from sensorveil.export.exporter import compared_units
    from sensorveil.export.validate import TOLERANCE, tolerance_error
    from sensorveil.sdk.mechanisms.pass_substitution import SubstitutionHead, SubstitutionModel

    head = SubstitutionHead(SubstitutionModel(torch.nn.Linear(4, 8), bank_size=5, dim=8, tau=0.01))
    logits = np.array([[98.7, -4.2, 12.0]], np.float32)
    off = logits + np.float32(3.3e-4)
    assert tolerance_error(off, logits, "fp32") > TOLERANCE["fp32"]
    to_cosines = compared_units(head)
    assert tolerance_error(to_cosines(off), to_cosines(logits), "fp32") <= TOLERANCE["fp32"]
    assert compared_units(torch.nn.Linear(4, 8)) is None
    assert tolerance_error(off, logits, "fp16") == pytest.approx(3.3e-4 / (98.7 + 4.2), rel=1e-2)
