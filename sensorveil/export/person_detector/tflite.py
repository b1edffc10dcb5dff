"""The camera bundle's person detector as a TFLite file: fp32 (the second form) or the Coral's int8 (the third).

Converted once from the cut graph by graph.py in its own process, checked against
onnxruntime's second form before it is cached (run as the runtime's LiteRT adapter runs it), and for int8 given
its own threshold, matched on the calibration frames to the fp32 graph's people (threshold.py). The
Edge TPU compiles the int8 file (writers.edgetpu_detector).
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import numpy as np

from sensorveil.export.person_detector.common import CUT_GRAPH, ENCODINGS_FORM, TFLITE_TOLERANCE
from sensorveil.export.person_detector.convert import (
    box_coder,
    check_matches,
    converted,
    detector_onnx,
    encodings_cut,
    tensorflow_step,
)
from sensorveil.export.person_detector.threshold import detections, matched_threshold
from sensorveil.runtime.camera.learned import DEFAULT_SCORE, decode


def detector_tflite(calibration: np.ndarray | None = None, progress=print) -> Path:
    """The cut graph as a .tflite: fp32 (the second form, decoded boxes), or the third form (box encodings
    and logits, int8 in and out: a whole Edge TPU graph) calibrated on ``calibration`` (N, 300, 300, 3) RGB
    frames (cached by their sha256). Either is checked against onnxruntime's second form before it is cached."""
    folder = converted(progress)
    if calibration is None:
        cut, anchors, cached = folder / CUT_GRAPH, None, folder / "detector_fp32.tflite"
    else:
        frames = np.ascontiguousarray(calibration, dtype=np.uint8)
        cut, anchors = encodings_cut(progress)
        cached = folder / f"detector_int8-{ENCODINGS_FORM}-{hashlib.sha256(frames.tobytes()).hexdigest()[:12]}.tflite"
    if cached.is_file():
        return cached
    progress(f"converting the person detector to {'int8' if calibration is not None else 'fp32'} TFLite once")
    with tempfile.TemporaryDirectory() as scratch:
        arguments = ["tflite", str(cut), str(Path(scratch) / "detector.tflite")]
        if calibration is not None:
            np.save(Path(scratch) / "calibration.npy", frames, allow_pickle=False)
            arguments += ["--calibration", str(Path(scratch) / "calibration.npy"), "--integer-output"]
        tensorflow_step(arguments, "convert to TFLite")
        check_tflite_matches(detector_onnx(progress), Path(scratch) / "detector.tflite",
                             TFLITE_TOLERANCE["fp32" if calibration is None else "int8"],
                             box_coder(anchors) if anchors else None)
        shutil.move(str(Path(scratch) / "detector.tflite"), str(cached))
    return cached


def check_tflite_matches(onnx_path: Path, tflite_path: Path, tolerance: float, coder: tuple | None = None) -> None:
    """The TFLite file's output within ``tolerance`` of onnxruntime's (check_matches), run by tflite_runner."""
    check_matches("TFLite file", onnx_path, tflite_runner(tflite_path, coder), tolerance)


def tflite_runner(tflite_path: Path, coder: tuple | None = None):
    """image (1, 300, 300, 3) float32 -> the file's (1, N, 6) rows, as the runtime's LiteRT adapter runs it
    (int8 quantizes its input and output with the file's own scale). With ``coder`` (scales, anchors) the file
    is the third form: its rows are decoded as the runtime decodes them (learned.decode) into boxes and
    sigmoid scores like the ONNX graph's."""
    from ai_edge_litert import interpreter as litert

    from sensorveil.runtime.backends.litert_backend import dequantize, quantize
    interpreter = litert.Interpreter(model_path=str(tflite_path))
    interpreter.allocate_tensors()
    port, output = interpreter.get_input_details()[0], interpreter.get_output_details()[0]

    def run(image):
        quantized = np.issubdtype(port["dtype"], np.integer) and port["quantization"][0] != 0
        interpreter.set_tensor(port["index"], quantize(image, port) if quantized else image.astype(port["dtype"]))
        interpreter.invoke()
        rows = interpreter.get_tensor(output["index"])
        rows = dequantize(rows, output) if output["quantization"][0] != 0 else rows
        return decode(rows, coder) if coder is not None else rows
    return run


def tflite_matched_score(tflite_path: Path, coder: tuple, frames: np.ndarray, camera_score: float = DEFAULT_SCORE,
                         progress=print) -> float:
    """The int8 TFLite file's own threshold on the calibration ``frames``: the one at which it finds the
    people the fp32 ONNX graph finds at ``camera_score`` (threshold.matched_threshold; DetectorUnavailable where
    none)."""
    run = tflite_runner(tflite_path, coder)
    rows = [run(frame[None].astype(np.float32)) for frame in frames]
    score = matched_threshold(detections(detector_onnx(progress), frames), rows, frames.shape[1:3],
                              "the int8 TFLite person detector", camera_score)
    progress(f"the int8 TFLite person detector's threshold: {score} (finds fp32's people at {camera_score})")
    return score
