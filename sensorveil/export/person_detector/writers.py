"""The top of the person detector's export: the detector written into a camera bundle as one more graph of each
artifact, by the writer the capability table names for its backend (DETECTOR_WRITERS). The one module of the
package that imports the per-format modules (onnx_int8, tflite); none of them imports it (.importlinter)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from sensorveil.export.person_detector.camera_fit import fit_camera
from sensorveil.export.person_detector.common import (
    ANCHORS_FILE,
    CALIBRATION_FRAMES,
    CAMERA_SPEEDS,
    SOURCE,
    TENSORRT_WORKSPACE_MB,
    DetectorUnavailable,
)
from sensorveil.export.person_detector.convert import box_coder, check_matches, detector_onnx, encodings_cut
from sensorveil.export.person_detector.frames import clip_frames
from sensorveil.export.person_detector.onnx_int8 import QUANTIZATION, detector_onnx_int8, matched_score
from sensorveil.export.person_detector.tflite import detector_tflite, tflite_matched_score
from sensorveil.runtime.camera.learned import (
    ANCHORS_KEY,
    COCO_PERSON,
    DETECTOR_GRAPH,
    DETECTOR_INPUT,
    DETECTOR_KIND,
    GRAPH_SCORE_KEY,
)
from sensorveil.runtime.capabilities import CAPABILITIES, split_reference


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
        self.fitted = None          # the camera's detector fields (camera_fit), once per export
        self.tflite_entry = None    # the litert graph entry, which the edgetpu artifact compiles from

    def calibration(self) -> np.ndarray:
        """Read once per export: the litert and edgetpu artifacts of one bundle share the int8 file."""
        if self.frames is None:
            self.frames = clip_frames(self.clip, CALIBRATION_FRAMES)
        return self.frames

    def camera_fields(self) -> dict:
        """The threshold and tiles fitted to the run's clip (camera_fit.fit_camera), with their record."""
        if self.fitted is None:
            self.fitted = fit_camera(self.clip, detector_onnx(self.progress), self.progress)
        return self.fitted

    @property
    def score(self) -> float:
        """The camera's threshold: the fp32 graph's, which a quantized graph's own matches people to."""
        return self.camera_fields()["detector_score"]


def add_person_detector(artifacts: dict, job: DetectorJob) -> dict:
    """Write the detector into the bundle as one more graph of each artifact (every backend runs the same cut
    graph: ONNX, an OpenVINO IR, TFLite fp32 or int8, the Edge TPU's int8 file, the ONNX TensorRT builds
    from); returns the manifest ``camera`` fields that make the pipeline run it, its threshold and tiles fitted
    to the run's clip (camera_fit)."""
    camera = job.camera_fields()
    for backend, artifact in artifacts.items():
        artifact["graphs"][DETECTOR_GRAPH] = {**DETECTOR_WRITERS[backend](job), "input_shape": [*DETECTOR_INPUT, 3],
                                              "source": SOURCE}
    return {"detector": DETECTOR_KIND, "detector_graph": DETECTOR_GRAPH, **camera,
            "detector_person_class": COCO_PERSON, **CAMERA_SPEEDS[job.speed]}


def onnx_detector(job: DetectorJob) -> dict:
    """fp32, or for int8 bundles (CPU boards) the int8 QDQ graph calibrated on the clip's frames and checked
    against fp32 (onnx_int8.py); float in and out either way, so no anchors. The "fast" camera speed takes the
    int8 graph where it finds fp32's people on this camera, and the fp32 graph where it does not (a crowd:
    docs/camera_speed-crowd.md): its lever is running the graph less often; int8 is a further one, never a
    reason to refuse the speed. An int8 bundle still refuses, as its precision was asked for."""
    if job.precision == "int8":
        return int8_onnx_entry(job)
    if job.speed == "fast":
        try:
            return int8_onnx_entry(job)
        except DetectorUnavailable as why:
            job.progress(f"the fast speed runs the fp32 person detector: {why}")
    file = f"{DETECTOR_GRAPH}.onnx"
    shutil.copyfile(detector_onnx(job.progress), job.out_dir / file)
    return {"file": file, "precision": "fp32"}


def int8_onnx_entry(job: DetectorJob) -> dict:
    """The int8 graph at the threshold matched to fp32's people (DetectorUnavailable where none is)."""
    file = f"{DETECTOR_GRAPH}_int8.onnx"
    quantized = detector_onnx_int8(job.calibration(), job.progress)
    score = matched_score(detector_onnx(job.progress), quantized, job.calibration(), job.score)
    job.progress(f"the int8 person detector's threshold: {score} (finds fp32's people at {job.score})")
    shutil.copyfile(quantized, job.out_dir / file)
    return {"file": file, "precision": "int8", "quantization": QUANTIZATION, GRAPH_SCORE_KEY: score}


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
    int8 = job.precision == "int8"
    source = detector_tflite(job.calibration() if int8 else None, job.progress)
    file = f"{DETECTOR_GRAPH}_{'int8' if int8 else 'fp32'}.tflite"
    shutil.copyfile(source, job.out_dir / file)
    if not int8:
        return {"file": file, "precision": "fp32"}
    anchors = encodings_cut(job.progress)[1]
    shutil.copyfile(anchors, job.out_dir / ANCHORS_FILE)
    score = tflite_matched_score(source, box_coder(anchors), job.calibration(), job.score, job.progress)
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


def check_ir_matches(onnx_path: Path, ir_path: Path, tolerance: float = 0.05) -> None:
    """The IR's output within ``tolerance`` of onnxruntime's (check_matches)."""
    import openvino as ov
    compiled = ov.Core().compile_model(ov.Core().read_model(str(ir_path)), "CPU")
    check_matches("OpenVINO IR", onnx_path, lambda image: np.asarray(list(compiled([image]).values())[0]), tolerance)


# backend -> the function that writes the person detector for it: the capability table's detector_writer column
DETECTOR_WRITERS = {row.backend: globals()[split_reference(row.detector_writer)[1]] for row in CAPABILITIES}
