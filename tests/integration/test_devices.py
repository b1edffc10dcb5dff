"""Device profiles, detection from (synthetic) evidence, and the static operator checks on graphs
with and without operators the target lacks."""
from __future__ import annotations

import json
import subprocess

import pytest

from sensorveil import devices
from sensorveil.export.device_check import check_graph, onnx_graph

PROFILES = ("jetson-nano", "jetson-orin-nano", "rpi3-ncs2", "rpi4-ncs2", "coral-devboard", "coral-usb",
            "x86-cpu", "nvidia-gpu", "rpi4-cpu", "rpi5-cpu")
NO_EVIDENCE = {"device_tree_model": "", "tegra_release": "", "usb_ids": [], "nvidia_smi": [], "machine": "aarch64"}


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.boots
def test_profile_is_complete(name):
    profile = devices.load_profile(name)
    for key in ("backend", "format", "precision", "precisions", "input_constraints", "requires", "setup_script",
                "reference_throughput", "detect"):
        assert key in profile, key
    assert profile["precision"] in profile["precisions"]
    assert "python" in profile["requires"] and profile["requires"]["libraries"]
    for figure in profile["reference_throughput"]:
        assert figure["source"] and figure["fps"] > 0
    script = devices.setup_script(name)
    assert script.is_file() and subprocess.run(["bash", "-n", str(script)]).returncode == 0
    operators = devices.operator_list(name)
    assert operators is None or (operators["source"].startswith("http") and operators["supported"])


def test_unknown_device_names_the_choices():
    with pytest.raises(devices.UnknownDeviceError, match="coral-usb"):
        devices.load_profile("coral-pci")


@pytest.mark.parametrize("evidence,expected", [
    ({"device_tree_model": "Raspberry Pi 4 Model B Rev 1.4", "usb_ids": ["03e7:2485"]}, ["rpi4-ncs2", "rpi4-cpu"]),
    ({"device_tree_model": "Raspberry Pi 4 Model B Rev 1.4"}, ["rpi4-cpu"]),    # no stick: its CPU only
    ({"device_tree_model": "Raspberry Pi 5 Model B Rev 1.0"}, ["rpi5-cpu"]),
    ({"device_tree_model": "Raspberry Pi 3 Model B Plus Rev 1.3", "usb_ids": ["1a6e:089a", "03e7:f63b"]},
     ["coral-usb", "rpi3-ncs2"]),
    ({"device_tree_model": "NVIDIA Jetson Nano Developer Kit", "tegra_release": "# R32 (release), REVISION: 7.1"},
     ["jetson-nano"]),
    ({"device_tree_model": "NVIDIA Jetson Orin Nano Developer Kit", "tegra_release": "# R36"}, ["jetson-orin-nano"]),
    ({"nvidia_smi": ["GPU 0: NVIDIA H100"], "machine": "x86_64"}, ["nvidia-gpu", "x86-cpu"]),
])
def test_detect_from_evidence(evidence, expected):
    assert [m["name"] for m in devices.detect({**NO_EVIDENCE, **evidence})] == expected


def test_detect_runs_on_this_machine():
    assert isinstance(devices.detect(), list)


def test_tensorrt_check_refuses_opsets_newer_than_the_parser(tmp_path):
    verdict = check_graph(_onnx_graph_with(tmp_path, "Relu", opset=17), devices.load_profile("jetson-nano"), "fp16")
    assert not verdict["compatible"] and any("opset 17 is newer" in p for p in verdict["problems"])


def _onnx_graph_with(tmp_path, op_type, opset=13):
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node(op_type, ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / f"{op_type}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return onnx_graph(path)


def test_tensorrt_check_flags_unsupported_onnx_operators(tmp_path):
    nano = devices.load_profile("jetson-nano")
    assert check_graph(_onnx_graph_with(tmp_path, "Relu"), nano, "fp16")["compatible"]
    verdict = check_graph(_onnx_graph_with(tmp_path, "NonZero"), nano, "fp16")   # N in the TensorRT 8.2 table
    assert not verdict["compatible"] and verdict["unsupported"] == ["NonZero"]
    # Xor came with TensorRT 8.4: the Jetson Nano's 8.2 parser must refuse it
    assert check_graph(_onnx_graph_with(tmp_path, "Xor"), nano, "fp16")["unsupported"] == ["Xor"]
    assert check_graph(_onnx_graph_with(tmp_path, "NonZero"), devices.load_profile("jetson-orin-nano"),
                       "fp16")["compatible"]                                       # added by TensorRT 8.5


def test_edgetpu_check_needs_int8_and_known_operators():
    coral = devices.load_profile("coral-usb")
    good = {"operators": ["QUANTIZE", "CONV_2D", "TANH", "ADD"], "float_operators": [], "dynamic_shapes": False,
            "io_types": ["INT8", "INT8"]}
    assert check_graph(good, coral, "int8")["compatible"]
    bad = {**good, "operators": good["operators"] + ["RELU_0_TO_1"], "float_operators": ["RELU_0_TO_1"],
           "io_types": ["FLOAT32", "FLOAT32"]}
    verdict = check_graph(bad, coral, "fp32")
    assert verdict["unsupported"] == ["RELU_0_TO_1"] and len(verdict["problems"]) == 4


def test_myriad_check_needs_static_shapes_and_old_opsets():
    ncs2 = devices.load_profile("rpi4-ncs2")
    graph = {"operators": ["Parameter", "Convolution", "Tanh", "Result"], "dynamic_shapes": False,
             "opset_versions": {"Convolution": "opset1", "Tanh": "opset1"}}
    assert check_graph(graph, ncs2, "fp16")["compatible"]
    verdict = check_graph({**graph, "dynamic_shapes": True, "operators": graph["operators"] + ["Einsum"],
                           "opset_versions": {"Einsum": "opset7", "ScatterNDUpdate": "opset15"}}, ncs2, "fp16")
    assert verdict["unsupported"] == ["Einsum"] and not verdict["compatible"]
    assert any("static shapes" in p for p in verdict["problems"]) and any("opset15" in p for p in verdict["problems"])


@pytest.mark.exports
@pytest.mark.trains
def test_devices_check_cli_on_real_bundles(digits_run, tmp_path, capsys):
    pytest.importorskip("openvino", reason="openvino is not installed")
    from sensorveil.cli import main
    from sensorveil.export import export_run
    dynamic = export_run(digits_run, "openvino", tmp_path / "ov", precision="fp16")
    assert main(["devices", "check", str(dynamic), "--device", "rpi3-ncs2", "--json", str(tmp_path / "r.json")]) == 1
    assert "static shapes" in capsys.readouterr().out
    static = export_run(digits_run, None, tmp_path / "ov-static", target="rpi3-ncs2")
    assert main(["devices", "check", str(static), "--device", "rpi3-ncs2"]) == 0
    onnx_bundle = export_run(digits_run, "tensorrt", tmp_path / "trt", precision="fp16")
    assert main(["devices", "check", str(onnx_bundle), "--device", "jetson-nano"]) == 0   # opset 13 by default
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["operator_counts"]["Convolution"] == 3 and report["problems"]


@pytest.mark.exports
@pytest.mark.trains
def test_edgetpu_note_names_the_graph_files_of_a_plain_int8_tflite_bundle(digits_run, tmp_path):
    """A tflite int8 bundle has no edgetpu artifact; the note's compile command names its own graph file."""
    pytest.importorskip("ai_edge_litert", reason="LiteRT is not installed")
    from sensorveil.cli import main
    from sensorveil.export import export_run
    bundle = export_run(digits_run, "tflite", tmp_path / "tflite-int8", precision="int8", calibration=16,
                        int8_check=False)
    main(["devices", "check", str(bundle), "--device", "coral-usb", "--json", str(tmp_path / "r.json")])
    note = json.loads((tmp_path / "r.json").read_text())["note"]
    assert "edgetpu_compiler -s -o" in note and "None" not in note and ".tflite" in note
