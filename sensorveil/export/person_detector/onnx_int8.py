"""The camera bundle's person detector as an int8 ONNX graph, for ONNX bundles exported with ``--precision int8``.

The Raspberry Pi and the Jetson's CPU run the detector in onnxruntime beside the privatizing model, so an
int8 bundle's detector is int8 too: the fp32 second form (convert.py: ``image``
(1, 300, 300, 3) float32 RGB 0-255 in, ``detections`` (1, 1917, 6) float32 out) statically quantized by
``onnxruntime.quantization.quantize_static`` in QDQ form: weights uint8 per output channel (symmetric, zero
point 128, all 8 bits), activations uint8 per tensor from MinMax ranges over the run's clip frames (the same
frames that calibrate the TFLite int8 file, DetectorJob.calibration). The graph's input and output stay
float32, so every adapter feeds it and the runtime's numpy suppression reads its rows exactly as it reads the
fp32 graph's; no anchors file is needed.

Why U8U8 (uint8 activations and weights), not onnxruntime's default S8S8 or the U8S8 this graph shipped as
first: on x86-64 CPUs with AVX2 or AVX-512 but no VNNI, onnxruntime multiplies uint8 activations by int8
weights with VPMADDUBSW, whose 16-bit pair sums saturate (its quantization guide, "Data type selection"). The
detector's 8-bit int8 weights saturate there: the same graph's output moves far from what exact integer
arithmetic gives (the check below then matches a threshold so low that the boxes outnumber the people), while
VNNI and ARM CPUs, which do not saturate, compute the graph as quantized. S8S8 in QDQ form does not avoid it:
on x86 onnxruntime runs int8 activations through the same uint8-by-int8 kernels, and it saturates alike.
7-bit weights (reduce_range, the guide's remedy) stop the saturation but lose too many people for the check.
U8U8 runs on kernels that do not saturate on any CPU, so the graph the export checks (on whatever x86 machine
exports) computes what the boards compute, and the threshold matched here holds there. Its cost: on x86
without VNNI the uint8-by-uint8 kernels are slower than the saturating ones (the int8 graph then saves little
over fp32 on such a machine); on the boards' ARM CPUs its speed against U8S8 is for
scripts/detector_int8_speed.py to measure there.

The box decoding and score tail (every node after the last convolution: the predictors' reshapes and
concatenations, the sigmoid, the box coder's Exp/Mul/Add and the final concatenation) stays float: it is a
few thousand elementwise values per frame, so int8 saves nothing there, and rounding the decoded corners and
scores to 8 bits would only add error to what the suppression compares with the score threshold.

Before it is cached the int8 graph must match the fp32 graph: its whole output on convert.check_matches's textured
image within INT8_TOLERANCE (the TFLite int8 file's bound), and on the calibration frames a threshold of its
own at which it finds the people the fp32 graph finds (threshold.py, the rule every
quantized detector ships by); the bundle's graph entry carries it as ``score`` (learned.GRAPH_SCORE_KEY). A
graph that fails either check is refused with DetectorUnavailable and never cached or shipped.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import numpy as np

from sensorveil.export.person_detector.common import INPUT, TFLITE_TOLERANCE, DetectorUnavailable
from sensorveil.export.person_detector.convert import check_matches, detector_onnx
from sensorveil.export.person_detector.threshold import detections, matched_threshold
from sensorveil.runtime.camera.learned import DEFAULT_SCORE, DETECTOR_OUTPUT, people_boxes

INT8_FORM = "qdq-u8u8-v3"        # in the cached file's name: a change of the recipe below is a new file
INT8_TOLERANCE = TFLITE_TOLERANCE["int8"]
QUANTIZATION = "QDQ, U8U8, weights per channel; box decoding and scores float"


class FrameReader:
    """onnxruntime.quantization's data reader over the calibration frames, one frame per call (batch 1: the
    shape the board runs), as float32 RGB 0-255 like the runtime feeds the graph."""

    def __init__(self, frames: np.ndarray):
        self.frames = iter(frames)

    def get_next(self):
        frame = next(self.frames, None)
        return None if frame is None else {INPUT: frame[None].astype(np.float32)}


def detector_onnx_int8(calibration: np.ndarray, progress=print) -> Path:
    """The int8 ONNX detector calibrated on ``calibration`` (N, 300, 300, 3) uint8 RGB frames: quantized on
    first use, checked against the fp32 graph, and cached beside it by the sha256 of the frames and the
    onnxruntime version (its quantizer's output changes between versions)."""
    source = detector_onnx(progress)
    frames = np.ascontiguousarray(calibration, dtype=np.uint8)
    cached = cached_path(source, frames)
    if cached.is_file():
        return cached
    progress(f"quantizing the person detector to int8 ONNX once ({len(frames)} calibration frames)")
    with tempfile.TemporaryDirectory() as scratch:
        quantized = quantize_detector(source, frames, Path(scratch))
        check_int8_detector(source, quantized, frames)
        shutil.move(str(quantized), str(cached))
    return cached


def cached_path(source: Path, frames: np.ndarray) -> Path:
    """Beside the fp32 graph (whose folder is keyed by the frozen graph and its converters)."""
    import onnxruntime as ort
    frames = np.ascontiguousarray(frames, dtype=np.uint8)
    key = hashlib.sha256(frames.tobytes() + ort.__version__.encode()).hexdigest()[:12]
    return source.parent / f"detector_int8-{INT8_FORM}-{key}.onnx"


def quantize_detector(source: Path, frames: np.ndarray, scratch: Path) -> Path:
    """quant_pre_process (shape inference, batch-norm folding) then quantize_static, the float tail left out."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from sensorveil.export.onnx_opsets import drop_unused_opsets
    prepared, out = scratch / "prepared.onnx", scratch / "detector_int8.onnx"
    quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
    # U8U8 with full 8-bit weights (the module docstring says why): int8 weights (U8S8, and S8S8, which
    # onnxruntime runs on the same kernels on x86) saturate on x86 CPUs without VNNI, so the export machine's
    # check would judge another graph than the boards run; 7-bit weights (reduce_range) do not saturate but
    # lose people on walkway's frames below matched_threshold's rule. Per channel, uint8 weights are
    # quantized symmetrically (one zero point, 128), which onnxruntime's QLinearConv requires.
    quantize_static(str(prepared), str(out), FrameReader(frames), quant_format=QuantFormat.QDQ,
                    per_channel=True, reduce_range=False, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QUInt8, calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"WeightSymmetric": True},
                    nodes_to_exclude=float_tail(onnx.load(str(prepared))))
    drop_unused_opsets(out)         # the boards' old onnxruntime refuses the quantizer's unused imports
    onnx.checker.check_model(onnx.load(str(out)))
    return out


def float_tail(model) -> list:
    """The names of the nodes no convolution follows: the reshapes, concatenations, sigmoid and box decoding
    after the predictors' last convolutions (found by the graph's shape, not by tf2onnx's node names)."""
    nodes = list(model.graph.node)
    feeds_conv = set()      # tensors a Conv reads, directly or through other nodes
    for node in reversed(nodes):                # a topologically sorted graph, read from its output back
        if node.op_type == "Conv" or any(name in feeds_conv for name in node.output):
            feeds_conv.update(node.input)
    return [node.name for node in nodes
            if node.op_type != "Conv" and not any(name in feeds_conv for name in node.output)]


def check_int8_detector(fp32: Path, int8: Path, frames: np.ndarray) -> None:
    """The int8 graph's whole output within INT8_TOLERANCE of the fp32 graph's (check_matches), and a
    threshold at which it finds on ``frames`` the people fp32 finds (matched_score); either failing is
    DetectorUnavailable."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(int8), providers=["CPUExecutionProvider"])
    ports = [port.name for port in session.get_inputs()], [port.name for port in session.get_outputs()]
    if ports != ([INPUT], [DETECTOR_OUTPUT]):
        raise DetectorUnavailable(f"the int8 person detector has ports {ports}; expected "
                                  f"{([INPUT], [DETECTOR_OUTPUT])} like the fp32 graph")
    check_matches("int8 ONNX graph", fp32, lambda image: session.run(None, {INPUT: image})[0], INT8_TOLERANCE)
    matched_score(fp32, int8, frames)


# (fp32 path, int8 graph's sha256, frames' sha256) -> threshold: the check at quantization and the export's
# graph entry ask for the same one, and each asking runs both graphs over every calibration frame
MATCHED = {}


def matched_score(fp32: Path, int8: Path, frames, camera_score: float = DEFAULT_SCORE) -> float:
    """The int8 graph's threshold on ``frames`` (threshold.matched_threshold): it finds fp32's people at
    ``camera_score``; DetectorUnavailable where none does (the check_int8_detector refusal)."""
    frames = np.ascontiguousarray(frames, dtype=np.uint8)
    key = (str(fp32), hashlib.sha256(Path(int8).read_bytes()).hexdigest(), hashlib.sha256(frames).hexdigest(),
           float(camera_score))
    if key not in MATCHED:
        MATCHED[key] = matched_threshold(detections(fp32, frames), detections(int8, frames), frames.shape[1:3],
                                         "the int8 person detector", camera_score)
    return MATCHED[key]


def people_counts(path: Path, frames, threads: int | None = None) -> list:
    """People per frame as the runtime counts them (learned.people_boxes at the default score, overlaps
    suppressed) on 300x300 RGB ``frames``."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    return [len(people_boxes(session.run(None, {INPUT: frame[None].astype(np.float32)})[0], frame.shape,
                             DEFAULT_SCORE)) for frame in frames]
