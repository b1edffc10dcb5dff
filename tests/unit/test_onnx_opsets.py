"""The int8 exports' opset imports are cut to what their nodes use (sensorveil.export.onnx_opsets): the
quantizer imports ai.onnx.ml 5 and com.microsoft unused, which onnxruntime 1.10 (Jetson's Python 3.6) refuses."""
import onnx
from onnx import TensorProto, helper

from sensorveil.export.onnx_opsets import drop_unused_opsets


def model_with(nodes, imports):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in imports])


def test_unused_domains_go_used_ones_and_the_default_stay(tmp_path):
    path = tmp_path / "m.onnx"
    imports = [("", 13), ("ai.onnx.ml", 5), ("com.microsoft", 1), ("ai.onnx.training", 1)]
    onnx.save(model_with([helper.make_node("Relu", ["x"], ["y"])], imports), str(path))
    drop_unused_opsets(path)
    assert [(e.domain, e.version) for e in onnx.load(str(path)).opset_import] == [("", 13)]
    onnx.save(model_with([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], imports), str(path))
    drop_unused_opsets(path)
    assert {e.domain for e in onnx.load(str(path)).opset_import} == {"", "com.microsoft"}
