"""Cross-backend parity: the same sensor input through every backend that runs here (onnxruntime,
LiteRT, OpenVINO CPU) gives the same privatized output, for PR-GAN on images and on vectors and
for PASS (whose model outputs probabilities over its substitute bank). TensorRT runs where it
imports; the runtime stays torch-free with every adapter loaded."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sensorveil.runtime import Privatizer

pytest.importorskip("litert_torch", reason="litert-torch is not installed (pip install 'sensorveil[export-tflite]')")
pytest.importorskip("openvino", reason="openvino is not installed (pip install 'sensorveil[openvino]')")

FP32_LIMIT = 1e-4


def export_all(run, root) -> dict:
    """One fp32 bundle per format that runs here, keyed by the backend that runs it."""
    from sensorveil.export import export_run
    return {"onnxruntime": export_run(run, "onnx", root / "onnx"),
            "litert": export_run(run, "tflite", root / "tflite"),
            "openvino": export_run(run, "openvino", root / "openvino")}


def model_outputs(bundles: dict, inputs: np.ndarray) -> dict:
    return {backend: Privatizer.load(path, backend=backend).pipeline.run_model(inputs)
            for backend, path in bundles.items()}


def assert_parity(outputs: dict) -> None:
    reference = outputs["onnxruntime"]
    for backend, out in outputs.items():
        assert out.shape[0] == reference.shape[0], backend
        diff = float(np.abs(out.reshape(reference.shape) - reference).max())
        assert diff <= FP32_LIMIT, f"{backend} differs from onnxruntime by {diff:.3g}"


def real_inputs(bundle, n: int = 8) -> np.ndarray:
    """Validation inputs: the run's own data in model units (the exporter's real samples)."""
    import json

    from sensorveil.export.exporter import Exporter
    run_dir = json.loads((bundle / "manifest.json").read_text())["training"]["run"]
    return Exporter(run_dir, bundle.parent / "unused").samples[:n]


@pytest.fixture(scope="module")
def digits_bundles(digits_run, tmp_path_factory):
    return export_all(digits_run, tmp_path_factory.mktemp("parity-digits"))


@pytest.mark.exports
@pytest.mark.trains
def test_prgan_image_parity(digits_bundles):
    assert_parity(model_outputs(digits_bundles, real_inputs(digits_bundles["onnxruntime"])))


@pytest.mark.exports
@pytest.mark.trains
def test_full_runtime_call_agrees_in_sensor_units(digits_bundles):
    spec = Privatizer.load(digits_bundles["onnxruntime"]).input_spec
    frames = np.random.default_rng(3).uniform(spec.low, spec.high, size=(5, *spec.sample_shape)).astype(spec.dtype)
    outputs = {b: Privatizer.load(p, backend=b)(frames) for b, p in digits_bundles.items()}
    for backend, out in outputs.items():
        assert out.dtype == spec.dtype and out.shape == frames.shape
        # integer sensor units: fp32 agreement can flip a rounding at most by one step
        assert np.abs(out.astype(np.int64) - outputs["onnxruntime"].astype(np.int64)).max() <= 1, backend


@pytest.mark.exports
@pytest.mark.trains
def test_prgan_vector_parity(uji_zip, tmp_path_factory):
    from tests.conftest import tiny_run
    run = tiny_run(tmp_path_factory.mktemp("runs") / "prgan-uji", "ujiindoorloc", data_path=uji_zip,
                   dataset_options={"max_rows": 600})
    bundles = export_all(run, tmp_path_factory.mktemp("parity-uji"))
    assert_parity(model_outputs(bundles, real_inputs(bundles["onnxruntime"])))


@pytest.mark.exports
@pytest.mark.trains
def test_pass_parity(tmp_path_factory):
    from sensorveil.sdk.mechanisms.pass_substitution import PASSConfig
    from sensorveil.sdk.runs import train_run
    run = train_run("pass", "digits", out=tmp_path_factory.mktemp("runs") / "pass-digits", useful=["parity"],
                    private=["lt5"], config=PASSConfig(epochs=1, substitutes=64, progress=False), attacker_epochs=1)
    bundles = export_all(run, tmp_path_factory.mktemp("parity-pass"))
    outputs = model_outputs(bundles, real_inputs(bundles["onnxruntime"]))
    assert_parity(outputs)          # the logits of eq. 2
    # the substitution kind samples from their softmax: every backend must agree on the distribution
    draw = Privatizer.load(bundles["onnxruntime"]).pipeline.stages[-1]
    probabilities = {backend: draw.probabilities(out.reshape(len(out), -1)) for backend, out in outputs.items()}
    for backend, probs in probabilities.items():
        assert np.allclose(probs.sum(1), 1.0, atol=1e-9)
        assert np.abs(probs - probabilities["onnxruntime"]).max() < 1e-3, backend


@pytest.mark.exports
@pytest.mark.trains
def test_tensorrt_parity(digits_run, tmp_path):
    pytest.importorskip("tensorrt", reason="tensorrt is not installed here (no NVIDIA GPU); see "
                                           "sensorveil/devices/setup/nvidia-gpu.sh")
    from sensorveil.export import export_run
    bundle = export_run(digits_run, "tensorrt", tmp_path / "trt", precision="fp32")
    inputs = real_inputs(bundle)
    trt = Privatizer.load(bundle, backend="tensorrt")
    assert trt.describe()["built_on_load"]
    onnx = Privatizer.load(bundle, backend="onnxruntime")
    diff = np.abs(trt.pipeline.run_model(inputs) - onnx.pipeline.run_model(inputs)).max()
    assert diff <= FP32_LIMIT
    assert not Privatizer.load(bundle, backend="tensorrt").describe()["built_on_load"]   # cached engine reused


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_runtime_adapters_import_without_torch(digits_bundles):
    code = ("import sys\n"
            "from sensorveil.runtime import Privatizer\n"
            f"for backend, path in {dict((b, str(p)) for b, p in digits_bundles.items())!r}.items():\n"
            "    Privatizer.load(path, backend=backend)\n"
            "bad = [m for m in sys.modules if m.split('.')[0] == 'torch' or m.startswith(('sensorveil.sdk', "
            "'sensorveil.export'))]\n"
            "assert not bad, bad\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
