"""The TensorFlow side of the person detector's export, run in a process of its own.

``python -m sensorveil.export.detector_graph cut FROZEN OUT.pb`` cuts the frozen COCO SSDLite graph to the
bundle's interface: one float input ``image`` (1, 300, 300, 3) RGB 0-255, one output ``detections``
(1, 1917, 6), a row per SSD anchor: the decoded box (ymin, xmin, ymax, xmax, 0-1), the person score and the
person class. The graph starts after its preprocessor's resize loop (the runtime resizes) and stops before
its postprocessor's non-maximum suppression over 90 classes (the runtime suppresses people alone): both are
loops that TFLite, TensorRT and the NCS2 cannot run. ``tflite CUT.pb OUT.tflite [--calibration FRAMES.npy]``
converts that cut graph with TensorFlow's own converter, fp32 or full-integer int8 with a uint8 input.

TensorFlow runs here in its own process because it and torch in one process fight over threads and
protobuf; the exporter calls this module with ``sys.executable -m``.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from sensorveil.runtime.camera.learned import COCO_PERSON, DETECTOR_INPUT, DETECTOR_OUTPUT

TF_INPUT = "Preprocessor/map/TensorArrayStack/TensorArrayGatherV3:0"   # the resized float image, 0-255
TF_OUTPUTS = ("Postprocessor/raw_box_locations:0", "Postprocessor/raw_box_scores:0")  # decoded boxes, sigmoids
INPUT = "image"


def tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    return tf


def cut(frozen: str, out: str) -> None:
    """The frozen graph between its resized image and its decoded boxes and scores, as one output."""
    tf = tensorflow()
    frozen_def = tf.compat.v1.GraphDef()
    with open(frozen, "rb") as handle:
        frozen_def.ParseFromString(handle.read())
    with tf.Graph().as_default() as graph:
        image = tf.compat.v1.placeholder(tf.float32, [1, *DETECTOR_INPUT, 3], name=INPUT)
        boxes, scores = tf.compat.v1.import_graph_def(frozen_def, input_map={TF_INPUT: image},
                                                      return_elements=list(TF_OUTPUTS), name="ssd")
        person = scores[:, :, COCO_PERSON:COCO_PERSON + 1]
        tf.concat([boxes, person, tf.ones_like(person) * float(COCO_PERSON)], axis=-1, name=DETECTOR_OUTPUT)
    cut_def = tf.compat.v1.graph_util.extract_sub_graph(graph.as_graph_def(), [DETECTOR_OUTPUT])
    loops = sorted({node.op for node in cut_def.node if node.op in ("Enter", "Exit", "LoopCond", "NextIteration")})
    if loops:
        raise SystemExit(f"the cut person detector still holds loop ops {loops}: it would not run on the boards")
    with open(out, "wb") as handle:
        handle.write(cut_def.SerializeToString())


def to_tflite(cut_graph: str, out: str, calibration: str | None = None) -> None:
    """The cut graph as a .tflite: fp32, or with ``calibration`` (N, 300, 300, 3) RGB frames full-integer
    int8 with a uint8 input (what the Edge TPU needs) and a float output."""
    tf = tensorflow()
    converter = tf.compat.v1.lite.TFLiteConverter.from_frozen_graph(
        cut_graph, [INPUT], [DETECTOR_OUTPUT], {INPUT: [1, *DETECTOR_INPUT, 3]})
    if calibration:
        frames = np.load(calibration).astype(np.float32)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([frame[None]] for frame in frames)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.uint8
        converter.inference_output_type = tf.float32
    with open(out, "wb") as handle:
        handle.write(converter.convert())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    cut_verb = verbs.add_parser("cut")
    cut_verb.add_argument("frozen")
    cut_verb.add_argument("out")
    tflite_verb = verbs.add_parser("tflite")
    tflite_verb.add_argument("cut_graph")
    tflite_verb.add_argument("out")
    tflite_verb.add_argument("--calibration", default=None, help="(N, 300, 300, 3) RGB frames (.npy): int8")
    args = parser.parse_args()
    if args.verb == "cut":
        cut(args.frozen, args.out)
    else:
        to_tflite(args.cut_graph, args.out, args.calibration)


if __name__ == "__main__":
    main()
