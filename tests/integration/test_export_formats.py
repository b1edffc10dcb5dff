"""TFLite (LiteRT), OpenVINO IR and TensorRT bundles from one tiny PR-GAN digits run: each is
validated right after export through the runtime it targets (or skipped with the reason)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sensorveil.runtime import Privatizer
from sensorveil.runtime.errors import BackendUnavailableError

pytestmark = [pytest.mark.exports, pytest.mark.trains]

pytest.importorskip("litert_torch", reason="litert-torch is not installed (pip install 'sensorveil[export-tflite]')")
pytest.importorskip("openvino", reason="openvino is not installed (pip install 'sensorveil[openvino]')")


def export(run, fmt, out, **kwargs):
    from sensorveil.export import export_run
    return export_run(run, fmt, out, **kwargs)


def validation(bundle) -> dict:
    manifest = json.loads((bundle / "manifest.json").read_text())
    return {(r["backend"], r.get("criterion", "numeric")): r for r in manifest["validation"]}


@pytest.fixture(scope="module")
def bundles(digits_run, tmp_path_factory):
    root = tmp_path_factory.mktemp("formats")
    made = {(fmt, precision): export(digits_run, fmt, root / f"{fmt}-{precision}", precision=precision)
            for fmt, precision in (("tflite", "fp32"), ("tflite", "fp16"), ("openvino", "fp32"),
                                   ("openvino", "fp16"), ("tensorrt", "fp16"))}
    # int8 through the coral-usb target: int8 I/O and the Edge TPU artefact; the privacy check
    # is exercised separately below with its result inspected rather than enforced.
    made["coral"] = export(digits_run, None, root / "coral", target="coral-usb", calibration=64, int8_check=False)
    return made


@pytest.mark.parametrize("key,backend,limit", [
    (("tflite", "fp32"), "litert", 1e-4), (("tflite", "fp16"), "litert", 1e-2),
    (("openvino", "fp32"), "openvino", 1e-4), (("openvino", "fp16"), "openvino", 1e-2)])
def test_each_format_is_validated_against_torch(bundles, key, backend, limit):
    record = validation(bundles[key])[(backend, "numeric")]
    assert record["status"] == "passed"
    error = record["relative_diff"] if key[1] == "fp16" else record["max_abs_diff"]
    assert error <= limit


def test_fp16_files_are_smaller_than_fp32(bundles):
    assert (bundles["tflite", "fp16"] / "model_fp16.tflite").stat().st_size < \
        0.7 * (bundles["tflite", "fp32"] / "model_fp32.tflite").stat().st_size
    assert (bundles["openvino", "fp16"] / "model.bin").stat().st_size < \
        0.7 * (bundles["openvino", "fp32"] / "model.bin").stat().st_size


def test_int8_model_has_int8_io_and_stays_close(bundles):
    bundle = bundles["coral"]
    p = Privatizer.load(bundle, backend="litert")
    assert p.describe()["io_dtype"] == "int8" and p.manifest["artifacts"]["litert"]["precision"] == "int8"
    record = validation(bundle)[("litert", "numeric")]
    # outputs beyond the calibrated range saturate (a few elements), the rest sit within 8-bit steps
    assert record["status"] == "measured" and record["max_abs_diff"] < 0.25
    import torch

    from sensorveil.export.exporter import Exporter
    exporter = Exporter(p.manifest["training"]["run"], bundle / "unused")
    inputs = exporter.samples
    with torch.no_grad():
        expected = exporter.graphs["model"].module(torch.from_numpy(inputs)).numpy()
    assert np.abs(p.pipeline.run_model(inputs).reshape(expected.shape) - expected).mean() < 0.01
    calibration = np.load(bundle / "calibration_inputs.npy")
    assert calibration.shape[0] == 64 and calibration.dtype == np.float32


def test_onnx_int8_is_qdq_with_float_io_and_stays_close(digits_run, tmp_path):
    """The CPU boards' int8: QDQ nodes around int8 weights, float I/O the runtime feeds as before."""
    import onnx
    bundle = export(digits_run, "onnx", tmp_path / "onnx-int8", precision="int8", calibration=64, int8_check=False)
    artifact = json.loads((bundle / "manifest.json").read_text())["artifacts"]["onnxruntime"]
    assert artifact["precision"] == "int8" and artifact["graphs"]["model"]["file"] == "model_int8.onnx"
    assert not (bundle / "model.onnx").exists()
    graph = onnx.load(str(bundle / "model_int8.onnx")).graph
    ops = {node.op_type for node in graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    int8_weights = [t for t in graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) > 1]
    assert int8_weights, "the conv/linear weights should be stored as int8"
    record = validation(bundle)[("onnxruntime", "numeric")]
    assert record["status"] == "measured" and record["max_abs_diff"] < 0.25
    assert np.load(bundle / "calibration_inputs.npy").shape[0] == 64


def test_uncompiled_edgetpu_bundle_says_how_to_compile(bundles):
    artifact = json.loads((bundles["coral"] / "manifest.json").read_text())["artifacts"]["edgetpu"]["graphs"]["model"]
    assert artifact["compiled"] is False and artifact["compile_command"].startswith("sensorveil devices compile ")
    with pytest.raises(BackendUnavailableError, match="sensorveil devices compile"):
        Privatizer.load(bundles["coral"], backend="edgetpu")


def test_int8_privacy_record_measures_the_shift(bundles, digits_run):
    from sensorveil.export.validate import INT8_FIGURES, int8_privacy_record
    record = int8_privacy_record(bundles["coral"], "litert", digits_run, attacker_epochs=1, seeds=2)
    for key in INT8_FIGURES:
        assert 0.0 <= record["int8"][key] <= 1.0
        assert record["shift"][key] == pytest.approx(record["int8"][key] - record["fp32"][key])
    families = record["families"]
    assert {"neural", "trees", "logistic", "trees+useful"} <= set(families)
    rises = [f["int8"]["mean"] > f["fp32"]["high"] for f in families.values()]
    assert record["status"] == ("failed" if any(rises) else "passed")


def test_tensorrt_bundle_carries_onnx_and_build_settings(bundles):
    bundle = bundles["tensorrt", "fp16"]
    manifest = json.loads((bundle / "manifest.json").read_text())
    graph = manifest["artifacts"]["tensorrt"]["graphs"]["model"]
    build = graph["build"]
    assert graph["file"] == "model.onnx" and graph["input_shape"] == [1, 8, 8]
    assert build["precision"] == "fp16" and build["workspace_mb"] > 0 and "trtexec" in build
    assert validation(bundle)[("onnxruntime", "numeric")]["status"] == "passed"
    trt = validation(bundle)[("tensorrt", "numeric")]
    assert trt["status"] in ("passed", "skipped") and (trt["status"] == "passed" or "tensorrt" in trt["reason"])


def test_target_chooses_format_precision_and_opset(digits_run, tmp_path):
    from sensorveil.export.device_check import plan_for_target
    assert plan_for_target("coral-usb", None, None) == ("tflite", "int8")
    assert plan_for_target("rpi3-ncs2", None, None) == ("openvino", "fp16")
    with pytest.raises(ValueError, match="runs"):
        plan_for_target("rpi4-ncs2", None, "fp32")
    with pytest.raises(ValueError, match="does not run there"):
        plan_for_target("coral-usb", "openvino", None)
    bundle = export(digits_run, None, tmp_path / "nano", target="jetson-nano")
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["target"] == "jetson-nano" and manifest["artifacts"]["tensorrt"]["opset"] == 13


def test_cli_export_with_target_prints_compile_command(digits_run, tmp_path, capsys):
    from sensorveil.cli import main
    assert main(["export", str(digits_run), "--target", "rpi4-ncs2", "--out", str(tmp_path / "ncs2")]) == 0
    out = capsys.readouterr().out
    assert "validation openvino (fp16): passed" in out
    assert Privatizer.load(tmp_path / "ncs2", backend="openvino").describe()["device"] in ("CPU", "MYRIAD")


def test_int8_prgan_maps_completely_onto_the_edge_tpu(bundles):
    from sensorveil.export.device_check import check_bundle
    report = check_bundle(bundles["coral"], "coral-usb")
    assert report["compatible"], report["problems"]
    assert "RELU_0_TO_1" not in report["operator_counts"] and "DEQUANTIZE" not in report["operator_counts"]


def test_int8_pass_keeps_its_bank_weights_and_maps_onto_the_edge_tpu(tmp_path):
    """The quantizer stores PASS's larger constants after the flatbuffer; the int8 interface rewrite
    used to drop them (the model then failed to load). The logits head keeps the softmax in numpy."""
    from sensorveil.export.device_check import check_bundle
    from sensorveil.sdk.mechanisms.pass_substitution import PASSConfig
    from sensorveil.sdk.runs import train_run
    run = train_run("pass", "digits", out=tmp_path / "pass", attacker_epochs=1,
                    config=PASSConfig(epochs=2, substitutes=128, embedding_dim=32, progress=False))
    bundle = export(run, None, tmp_path / "pass-coral", target="coral-usb", calibration=64, int8_check=False)
    report = check_bundle(bundle, "coral-usb")
    assert report["compatible"], report["problems"]
    assert (bundle / "model_int8.tflite").stat().st_size > 100_000     # the weights are inside
    p = Privatizer.load(bundle, backend="litert", output="index", seed=0)
    indices = p(np.random.default_rng(0).uniform(0, 16, size=(20, 8, 8)).astype(np.float32))
    assert indices.shape == (20,) and indices.max() < 128
    probs = p.pipeline.stages[-1].probabilities(p.pipeline.run_model(np.full((1, 1, 8, 8), 0.5, np.float32)))
    assert probs.shape == (1, 128) and abs(probs.sum() - 1) < 1e-9


def test_benchmark_of_a_coral_bundle_skips_the_uncompiled_edge_tpu_and_says_why(bundles):
    from sensorveil.benchmarks.bench import benchmark_bundle
    result = benchmark_bundle(bundles["coral"], iters=20, warmup=2)
    assert [row["backend"] for row in result["rows"]] == ["litert"]
    [skipped] = result["skipped"]
    assert skipped["backend"] == "edgetpu" and "not compiled" in skipped["reason"]
