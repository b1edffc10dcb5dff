"""Sensor units inside the graph: every format that runs here, exported with the
normalization as the graph's first and last operations, privatizes a sensor frame exactly as the
runtime's numpy path did (integer sensors within one level); bundles without the field still load; the
schema refuses bad values; int8 (Edge TPU) keeps model units and stays fully mapped."""
from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest

from sensorveil.runtime import Privatizer
from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.schema import ManifestError, validate_manifest

pytest.importorskip("litert_torch", reason="litert-torch is not installed (pip install 'sensorveil[export-tflite]')")
pytest.importorskip("openvino", reason="openvino is not installed (pip install 'sensorveil[openvino]')")

# format -> the backend that runs it here (a tensorrt bundle's graph runs on onnxruntime without a GPU)
FORMATS = {"onnx": "onnxruntime", "tflite": "litert", "openvino": "openvino", "tensorrt": "onnxruntime"}
FLOAT_LIMIT = 1e-4     # float sensors: max |difference| in model units


def export_both(run, root) -> dict:
    """{(format, units): bundle}: each format with the units in the graph and in the runtime."""
    from sensorveil.export import export_run
    return {(fmt, units): export_run(run, fmt, root / f"{fmt}-{units}", sensor_units=units == "sensor")
            for fmt in FORMATS for units in ("sensor", "model")}


@pytest.fixture(scope="module")
def depth_bundles(tmp_path_factory):
    """uint16 depth: the integer path, and the dtype torch cannot trace (stand-ins, retyped ONNX I/O)."""
    from tests.conftest import tiny_run
    run = tiny_run(tmp_path_factory.mktemp("runs") / "prgan-depth", "synthetic-depth",
                   dataset_options={"n_identities": 3, "samples_per_class": 8})
    return export_both(run, tmp_path_factory.mktemp("units-depth"))


@pytest.fixture(scope="module")
def digits_bundles(digits_run, tmp_path_factory):
    """float32 digits: no rounding, the sensor dtype carried as is."""
    return export_both(digits_run, tmp_path_factory.mktemp("units-digits"))


def sensor_frames(privatizer, n=6, seed=0) -> np.ndarray:
    spec = privatizer.input_spec
    frames = np.random.default_rng(seed).uniform(spec.low, spec.high, size=(n, *spec.sample_shape))
    return (np.rint(frames) if spec.dtype.kind in "ui" else frames).astype(spec.dtype)


def both_ways(bundles, fmt) -> tuple:
    backend = FORMATS[fmt]
    return (Privatizer.load(bundles[fmt, "sensor"], backend=backend),
            Privatizer.load(bundles[fmt, "model"], backend=backend))


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.exports
@pytest.mark.trains
def test_integer_sensor_output_matches_the_numpy_path_within_one_level(depth_bundles, fmt):
    in_graph, numpy_path = both_ways(depth_bundles, fmt)
    assert (in_graph.takes, numpy_path.takes) == ("sensor", "model")
    frames = sensor_frames(in_graph)
    y, reference = in_graph(frames), numpy_path(frames)
    assert y.dtype == reference.dtype == np.uint16 and y.shape == reference.shape == frames.shape
    assert np.abs(y.astype(np.int64) - reference.astype(np.int64)).max() <= 1
    # one sample as well as a batch (OpenVINO's kernels differ by batch size: one rounding may flip)
    assert np.abs(in_graph(frames[0]).astype(np.int64) - y[0].astype(np.int64)).max() <= 1


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.exports
@pytest.mark.trains
def test_float_sensor_output_matches_the_numpy_path(digits_bundles, fmt):
    in_graph, numpy_path = both_ways(digits_bundles, fmt)
    assert in_graph.takes == "sensor"
    frames = sensor_frames(in_graph)
    y, reference = in_graph(frames), numpy_path(frames)
    assert y.dtype == reference.dtype == np.float32
    assert np.abs(y - reference).max() / in_graph.output_spec.scale <= FLOAT_LIMIT


@pytest.mark.exports
@pytest.mark.trains
def test_the_onnx_graph_takes_and_returns_the_sensor_dtype(depth_bundles):
    import onnxruntime as ort
    bundle = depth_bundles["onnx", "sensor"]
    session = ort.InferenceSession(str(bundle / "model.onnx"))
    assert session.get_inputs()[0].type == session.get_outputs()[0].type == "tensor(uint16)"
    stage = json.loads((bundle / "manifest.json").read_text())["pipeline"][0]
    assert stage["units"] == "sensor" and "units_note" in stage


@pytest.mark.exports
@pytest.mark.trains
def test_the_frame_reaches_the_graph_without_a_copy(depth_bundles):
    p = Privatizer.load(depth_bundles["onnx", "sensor"], backend="onnxruntime")
    frames = sensor_frames(p, n=2)
    graph_input = p.pipeline.graph_input(frames)
    assert np.shares_memory(graph_input, frames) and graph_input.shape == (2, *p.input_spec.model_shape)
    # the split a stream times (graph_input, run_model, sensor_output) is the whole call
    assert np.array_equal(p.pipeline.sensor_output(p.pipeline.run_model(graph_input)), p(frames))


@pytest.mark.exports
@pytest.mark.trains
def test_other_dtypes_are_clipped_before_the_cast(depth_bundles):
    """A float frame with readings out of range must not wrap around in the cast to uint16."""
    in_graph, numpy_path = both_ways(depth_bundles, "onnx")
    spec = in_graph.input_spec
    frames = sensor_frames(in_graph, n=2).astype(np.float64)
    frames[:, :4] = -50.0
    frames[:, 4:8] = spec.high + 1000.0
    assert np.abs(in_graph(frames).astype(np.int64) - numpy_path(frames).astype(np.int64)).max() <= 1


@pytest.mark.exports
@pytest.mark.trains
def test_a_bundle_without_the_field_loads_in_model_units(depth_bundles, tmp_path):
    source = depth_bundles["onnx", "model"]
    bundle = tmp_path / "no-units-field"
    shutil.copytree(source, bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for key in ("units", "units_note"):
        manifest["pipeline"][0].pop(key)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    old, new = Privatizer.load(bundle), Privatizer.load(source)
    assert old.takes == "model"
    frames = sensor_frames(old)
    assert np.array_equal(old(frames), new(frames))


def bad_units(manifest: dict, **stage_fields) -> dict:
    manifest = copy.deepcopy(manifest)
    manifest["pipeline"][0].update(stage_fields)
    return manifest


@pytest.mark.parametrize("fields,match", [
    ({"units": "Sensor"}, r"pipeline\[0\]\.units.*one of \['model', 'sensor'\]"),
    ({"units": 1}, r"pipeline\[0\]\.units"),
    ({"units": None}, r"pipeline\[0\]\.units"),
    ({"units": "sensor", "emits": "representation"}, "representation")])
@pytest.mark.exports
@pytest.mark.trains
def test_schema_rejects_bad_units(depth_bundles, fields, match):
    manifest = json.loads((depth_bundles["onnx", "sensor"] / "manifest.json").read_text())
    with pytest.raises(ManifestError, match=match):
        validate_manifest(bad_units(manifest, **fields), "test")


@pytest.mark.exports
@pytest.mark.trains
def test_schema_rejects_sensor_units_in_a_longer_pipeline(depth_bundles):
    manifest = json.loads((depth_bundles["onnx", "sensor"] / "manifest.json").read_text())
    manifest["pipeline"].append({"kind": "model", "graph": "model"})
    with pytest.raises(ManifestError, match="one-stage pipeline"):
        validate_manifest(manifest, "test")


@pytest.mark.exports
@pytest.mark.trains
def test_a_stage_with_bad_units_is_refused_at_load(depth_bundles, tmp_path):
    bundle = tmp_path / "bad"
    shutil.copytree(depth_bundles["onnx", "sensor"], bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    (bundle / "manifest.json").write_text(json.dumps(bad_units(manifest, units="both")))
    with pytest.raises(BundleError, match="units"):
        Privatizer.load(bundle)


# -- where the units stay in the runtime -------------------------------------------------------------
@pytest.mark.exports
@pytest.mark.trains
def test_int8_for_the_edge_tpu_keeps_model_units_and_maps_fully(digits_run, tmp_path):
    from sensorveil.export import export_run
    from sensorveil.export.device_check import check_bundle
    bundle = export_run(digits_run, None, tmp_path / "coral", target="coral-usb", calibration=32, int8_check=False)
    stage = json.loads((bundle / "manifest.json").read_text())["pipeline"][0]
    assert stage["units"] == "model" and "Edge TPU" in stage["units_note"]
    assert Privatizer.load(bundle, backend="litert").takes == "model"
    report = check_bundle(bundle, "coral-usb")
    assert report["compatible"], report["problems"]


def plan(fmt="onnx", precision="fp32", target=None, pipeline=None, dtype="uint16"):
    from sensorveil.devices import load_profile
    from sensorveil.export.sensor_units import plan_units
    spec = {"dtype": dtype}
    return plan_units(fmt, precision, load_profile(target) if target else None,
                      pipeline or [{"kind": "model", "graph": "model"}], spec, spec)


def test_the_plan_says_where_the_units_go():
    assert (plan().units, plan().input_dtype, plan().output_dtype) == ("sensor", "uint16", "uint16")
    assert plan("tflite").input_dtype == "int32"           # LiteRT cannot take uint16 from torch
    assert plan("tensorrt").input_dtype == "float32"       # TensorRT's buffers are float32
    assert plan("tflite", dtype="uint8").input_dtype == "uint8"
    assert plan("onnx", dtype="float32").input_dtype == "float32"
    assert plan("tflite", "int8").units == "model"
    assert plan("tensorrt", "int8").units == "model"
    assert "Round" in plan("openvino", "fp16", target="rpi4-ncs2").note    # MYRIAD has no Round
    assert plan("tensorrt", "fp16", target="jetson-nano").units == "sensor"
    assert plan(pipeline=[{"kind": "model", "graph": "model", "emits": "representation"}]).units == "model"
    assert plan(pipeline=[{"kind": "model", "graph": "model"}, {"kind": "substitution"}]).units == "model"
