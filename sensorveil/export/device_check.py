"""Static device checks: will this bundle's graph run on that device, before it gets there?

    sensorveil devices check BUNDLE --device coral-usb

Every operator of the exported graph is looked up in the device's operator list (data files in
sensorveil/devices/operators, each naming its source): the Edge TPU compiler's operators plus
its full-int8 requirement, the ONNX operators of the profile's TensorRT parser and its highest
opset, the OpenVINO operations the MYRIAD plugin supported in 2022.3 (the last release with the
NCS2). Shapes must be static where the target requires it. The answer lists what offends.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from sensorveil.devices import load_profile, operator_list
from sensorveil.runtime.bundle import open_bundle

# export format -> the backends that run it
FORMAT_BACKENDS = {"onnx": ("onnxruntime",), "tflite": ("litert", "edgetpu"), "openvino": ("openvino",),
                   "tensorrt": ("tensorrt",)}


def plan_for_target(target: str | None, fmt: str | None, precision: str | None) -> tuple[str, str]:
    """The (format, precision) to export: what the caller gave, else what the device profile runs."""
    if target is None:
        if fmt is None:
            raise ValueError("export needs --format (onnx, tflite, openvino, tensorrt) or --target DEVICE")
        return fmt, precision or "fp32"
    profile = load_profile(target)
    fmt = fmt or profile["format"]
    precision = precision or profile["precision"]
    if profile["backend"] not in FORMAT_BACKENDS.get(fmt, ()):
        raise ValueError(f"device {target!r} runs {profile['backend']} ({profile['format']} bundles); "
                         f"--format {fmt} does not run there")
    if precision not in profile["precisions"]:
        raise ValueError(f"device {target!r} runs {profile['precisions']}, not {precision}"
                         + (f" ({profile['precision_note']})" if "precision_note" in profile else ""))
    return fmt, precision


# -- reading operators out of each format ---------------------------------------------------
def tflite_graph(path: Path) -> dict:
    from ai_edge_litert import schema_py_generated as schema
    model = schema.Model.GetRootAs(path.read_bytes(), 0)
    names = {value: key for key, value in vars(schema.BuiltinOperator).items() if not key.startswith("_")}
    types = {value: key for key, value in vars(schema.TensorType).items() if not key.startswith("_")}
    graph = model.Subgraphs(0)
    operators, float_ops, dynamic = [], set(), False
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        name = names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), f"CUSTOM:{code.CustomCode()}")
        operators.append(name)
        tensors = [graph.Tensors(t) for t in list(op.InputsAsNumpy()) + list(op.OutputsAsNumpy()) if t >= 0]
        activations = [t for t in tensors if model.Buffers(t.Buffer()).DataLength() == 0]
        if name not in ("QUANTIZE", "DEQUANTIZE") and any(types[t.Type()] == "FLOAT32" for t in activations):
            float_ops.add(name)
    for t in range(graph.TensorsLength()):
        signature = graph.Tensors(t).ShapeSignatureAsNumpy() if graph.Tensors(t).ShapeSignatureLength() else []
        dynamic = dynamic or any(int(d) < 0 for d in signature)
    io_types = [types[graph.Tensors(graph.Inputs(0)).Type()], types[graph.Tensors(graph.Outputs(0)).Type()]]
    return {"operators": operators, "float_operators": sorted(float_ops), "dynamic_shapes": dynamic,
            "io_types": io_types}


def onnx_graph(path: Path) -> dict:
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    opset = max(entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx"))
    dims = [d for value in model.graph.input for d in value.type.tensor_type.shape.dim]
    return {"operators": [node.op_type for node in model.graph.node], "opset": opset,
            "dynamic_shapes": any(not d.HasField("dim_value") for d in dims)}


def openvino_graph(path: Path) -> dict:
    try:
        from openvino import Core
    except ImportError:   # OpenVINO 2022.3 exposes its API under openvino.runtime only
        from openvino.runtime import Core
    model = Core().read_model(str(path))
    ops = model.get_ordered_ops()
    versions = {op.get_type_name(): op.get_type_info().version_id for op in ops}
    return {"operators": [op.get_type_name() for op in ops], "opset_versions": versions,
            "dynamic_shapes": model.is_dynamic()}


# -- checks ------------------------------------------------------------------------------
def _artifact_for(bundle, profile: dict) -> tuple[str, dict]:
    artifacts = bundle.manifest["artifacts"]
    for backend in (profile["backend"],) + (("litert",) if profile["backend"] == "edgetpu" else ()):
        if backend in artifacts:
            return backend, artifacts[backend]
    raise ValueError(f"bundle {bundle.root} has no artifact for {profile['backend']} (it has {sorted(artifacts)}); "
                     f"export it with --target {profile['name']}")


def _opset_number(version_id: str) -> int:
    digits = "".join(ch for ch in version_id if ch.isdigit())
    return int(digits) if version_id.startswith("opset") and digits else 0


def check_graph(graph: dict, profile: dict, precision: str) -> dict:
    """Operator-by-operator verdict for one graph against one profile."""
    allowed = operator_list(profile["name"])
    counts = Counter(graph["operators"])
    problems = []
    unsupported = sorted(op for op in counts if allowed is not None and op not in allowed["supported"])
    if unsupported:
        problems.append(
            f"{len(unsupported)} operator type(s) not supported by {profile['name']}: {', '.join(unsupported)}"
        )
    if graph.get("opset") and allowed and graph["opset"] > allowed.get("max_opset", graph["opset"]):
        problems.append(
            f"ONNX opset {graph['opset']} is newer than the parser's {allowed['max_opset']}; "
            f"re-export with --target {profile['name']}"
        )
    too_new = sorted(
        op
        for op, version in graph.get("opset_versions", {}).items()
        if allowed and _opset_number(version) > allowed.get("max_opset", 99)
    )
    if too_new:
        problems.append(
            f"operation versions newer than opset{allowed['max_opset']}: "
            + ", ".join(f"{op} ({graph['opset_versions'][op]})" for op in too_new)
        )
    constraints = profile.get("input_constraints", {})
    if constraints.get("static_shapes") and graph["dynamic_shapes"]:
        problems.append(f"{profile['name']} needs static shapes; the graph has a dynamic dimension")
    if constraints.get("io_dtype") == "int8":
        if precision != "int8" or graph.get("io_types", ["INT8"]) != ["INT8", "INT8"]:
            problems.append(
                f"{profile['name']} needs int8 inputs/outputs; this model has {graph.get('io_types')} ({precision})"
            )
        if graph.get("float_operators"):
            problems.append(
                "not fully int8: float tensors around "
                + ", ".join(graph["float_operators"])
                + " (the Edge TPU compiler stops mapping at the first of these; the rest runs on the CPU)"
            )
    if precision not in profile["precisions"]:
        problems.append(f"{profile['name']} runs {profile['precisions']}, the bundle is {precision}")
    return {
        "operator_counts": dict(counts),
        "unsupported": unsupported,
        "problems": problems,
        "operator_source": allowed["source"] if allowed else "no operator restriction for this profile",
        "compatible": not problems,
    }


def check_bundle(bundle_dir, device: str) -> dict:
    """Every graph the device would run, checked against the device's operator list."""
    profile = load_profile(device)
    bundle = open_bundle(bundle_dir)
    backend, artifact = _artifact_for(bundle, profile)
    precision = artifact.get("precision", "fp32")
    reader = {"tflite": tflite_graph, "onnx": onnx_graph, "openvino-ir": openvino_graph}[artifact["format"]]
    names = bundle.graph_names(backend)
    counts, unsupported, problems, source = Counter(), set(), [], None
    for name in names:
        entry = bundle.graph_artifact(backend, name)
        verdict = check_graph(reader(bundle.path(entry["file"])), profile, precision)
        counts.update(verdict["operator_counts"])
        unsupported.update(verdict["unsupported"])
        problems += [f"{name}: {problem}" if len(names) > 1 else problem for problem in verdict["problems"]]
        source = verdict["operator_source"]
    files = [bundle.graph_artifact(backend, name)["file"] for name in names]
    report = {
        "device": device,
        "bundle": str(bundle.root),
        "backend": backend,
        "file": ", ".join(files),
        "graphs": names,
        "precision": precision,
        "operator_counts": dict(counts),
        "unsupported": sorted(unsupported),
        "problems": problems,
        "operator_source": source,
        "compatible": not problems,
    }
    if profile["backend"] == "edgetpu":
        # a plain int8 tflite bundle has no edgetpu artifact: its litert graphs are the ones to compile
        source = "edgetpu" if "edgetpu" in bundle.manifest["artifacts"] else backend
        entries = [bundle.graph_artifact(source, name) for name in bundle.graph_names(source)]
        uncompiled = [entry for entry in entries if not entry.get("compiled")]
        if uncompiled:
            report["note"] = "not compiled for the Edge TPU yet; on an x86-64 host run: " + "; ".join(
                entry.get("compile_command", f"edgetpu_compiler -s -o BUNDLE BUNDLE/{entry.get('file')}")
                for entry in uncompiled
            )
    return report
