"""The runtime: torch-free, strict about its input, strict about its bundle."""
from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

from sensorveil.runtime import BundleError, InputError, Privatizer
from sensorveil.runtime.errors import BackendUnavailableError


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_runtime_runs_without_torch_sdk_or_export_in_a_fresh_interpreter(digits_bundle):
    code = f"""
import sys, numpy as np
from sensorveil.runtime import Privatizer
p = Privatizer.load({str(digits_bundle)!r})
y = p(np.full((8, 8), 7.0, dtype=np.float32))
assert y.shape == (8, 8), y.shape
leaked = [m for m in ("torch", "sensorveil.sdk", "sensorveil.export", "sklearn") if m in sys.modules]
print("LEAKED", leaked)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "LEAKED []" in result.stdout, result.stdout + result.stderr


@pytest.mark.exports
@pytest.mark.trains
def test_single_sample_and_batch_in_sensor_units(digits_bundle):
    p = Privatizer.load(digits_bundle)
    rng = np.random.default_rng(1)
    batch = rng.uniform(0, 16, size=(5, 8, 8)).astype(np.float32)
    out = p(batch)
    assert out.shape == (5, 8, 8) and out.dtype == np.float32
    assert out.min() >= 0 and out.max() <= 16
    np.testing.assert_allclose(p(batch[2]), out[2], atol=1e-5)
    # integer codes of another dtype would be clipped into 0..16 silently (8-bit pixels): one clear error,
    # unless the manifest declares the conversion
    with pytest.raises(InputError, match="input dtype uint8 is not the bundle's input dtype float32"):
        p(batch.astype(np.uint8))


@pytest.mark.exports
@pytest.mark.trains
def test_an_integer_dtype_the_manifest_declares_is_converted(digits_bundle, tmp_path):
    bundle = copy_bundle(digits_bundle, tmp_path)
    edit_manifest(bundle, lambda m: m["input"].update(accepts_dtypes=["uint8"]))
    frame = np.arange(64).reshape(8, 8) % 17
    assert Privatizer.load(bundle)(frame.astype(np.uint8)).shape == (8, 8)


@pytest.mark.exports
@pytest.mark.trains
def test_depth_bundle_keeps_uint16_millimetres(depth_bundle):
    p = Privatizer.load(depth_bundle)
    frame = np.random.default_rng(0).integers(500, 3000, size=(180, 180)).astype(np.uint16)
    out = p(frame)
    assert out.dtype == np.uint16 and out.shape == (180, 180)
    assert out.max() <= 4500


@pytest.mark.parametrize("bad, fragment", [
    (np.zeros((7, 8), np.float32), "shape (7, 8)"),
    (np.zeros((2, 3, 8, 8), np.float32), "shape (2, 3, 8, 8)"),
    (np.zeros((8, 8), np.complex64), "not numeric"),
    (np.array([["a"] * 8] * 8), "not numeric"),
    (np.zeros((0, 8, 8), np.float32), "empty"),
    (np.full((8, 8), np.nan, np.float32), "NaN/inf"),
    (np.full((2, 8, 8), np.inf, np.float64), "NaN/inf"),
])
@pytest.mark.exports
@pytest.mark.trains
def test_bad_input_gets_one_clear_error(digits_bundle, bad, fragment):
    p = Privatizer.load(digits_bundle)
    with pytest.raises(InputError) as error:
        p(bad)
    message = str(error.value)
    assert fragment in message and "expected float32 array of shape (8, 8)" in message


def copy_bundle(bundle, tmp_path):
    target = tmp_path / "bundle"
    shutil.copytree(bundle, target)
    return target


def edit_manifest(bundle, change):
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


@pytest.mark.exports
@pytest.mark.trains
def test_tampered_model_file_is_refused(digits_bundle, tmp_path):
    bundle = copy_bundle(digits_bundle, tmp_path)
    model = bundle / "model.onnx"
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF                       # same size, one flipped byte
    model.write_bytes(bytes(data))
    with pytest.raises(BundleError, match="sha256 .* does not match"):
        Privatizer.load(bundle)


@pytest.mark.parametrize("change, fragment", [
    (lambda m: m.update(schema_version=99), "schema_version 99 is not supported"),
    (lambda m: m.pop("input"), "lacks required keys"),
    (lambda m: m["files"].update({"../outside": {"sha256": "0", "size": 1}}), "outside the bundle"),
    (lambda m: m["files"].update({"missing.bin": {"sha256": "0" * 64, "size": 1}}), "is missing"),
    (lambda m: m["input"].pop("normalization"), "lacks ['normalization']"),
    (lambda m: m["artifacts"].update({"onnxruntime": {"graphs": {"model": {"file": "nowhere.onnx"}}}}), "not listed"),
    (lambda m: m["artifacts"]["onnxruntime"].pop("graphs"), "with a 'graphs' key"),
    (lambda m: m.update(pipeline=[]), "non-empty list of stages"),
    (lambda m: m.update(pipeline=[{"kind": "model", "graph": "decoder"}]), "does not carry"),
    (lambda m: m.update(pipeline=[{"kind": "teleport"}]), "'teleport' is not known"),
])
@pytest.mark.exports
@pytest.mark.trains
def test_malformed_manifest_is_refused(digits_bundle, tmp_path, change, fragment):
    bundle = copy_bundle(digits_bundle, tmp_path)
    edit_manifest(bundle, change)
    with pytest.raises(BundleError) as error:
        Privatizer.load(bundle)
    assert fragment in str(error.value)


@pytest.mark.exports
@pytest.mark.trains
def test_invalid_json_and_missing_bundle_are_refused(digits_bundle, tmp_path):
    bundle = copy_bundle(digits_bundle, tmp_path)
    (bundle / "manifest.json").write_text("{not json")
    with pytest.raises(BundleError, match="not valid JSON"):
        Privatizer.load(bundle)
    with pytest.raises(BundleError, match="expected a bundle directory"):
        Privatizer.load(tmp_path / "does-not-exist")


@pytest.mark.exports
@pytest.mark.trains
def test_loading_and_running_never_unpickles(digits_bundle, monkeypatch):
    def refuse(*_, **__):
        raise AssertionError("the runtime tried to unpickle something")
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    Privatizer.load(digits_bundle)(np.ones((8, 8), np.float32))


@pytest.mark.exports
@pytest.mark.trains
def test_unknown_backend_is_a_clear_error(digits_bundle):
    with pytest.raises(BackendUnavailableError, match="unknown backend 'nope'"):
        Privatizer.load(digits_bundle, backend="nope")
