"""The TensorFlow side of the person detector's export, run in a process of its own.

``python -m sensorveil.export.person_detector.graph cut FROZEN OUT.pb`` cuts the frozen COCO SSDLite graph to the
bundle's interface: one float input ``image`` (1, 300, 300, 3) RGB 0-255, one output ``detections``
(1, 1917, 6), a row per SSD anchor: the decoded box (ymin, xmin, ymax, xmax, 0-1), the person score and the
person class. The graph starts after its preprocessor's resize loop (the runtime resizes) and stops before
its postprocessor's non-maximum suppression over 90 classes (the runtime suppresses people alone): both are
loops that TFLite, TensorRT and the NCS2 cannot run. ``cut --form encodings --anchors ANCHORS.npy`` (the
third form, for the Edge TPU) stops earlier, before the box coder (its EXP, UNPACK and float tail are not
Edge TPU ops): the output is (1, 1917, 5), each anchor's box encoding (ty, tx, th, tw) and person logit,
and the box coder's scale factors and anchors, evaluated in the graph itself, go to ANCHORS.npy (1 + 1917, 4).
``tflite CUT.pb OUT.tflite [--calibration FRAMES.npy [--integer-output]]`` converts a cut graph with
TensorFlow's own converter: fp32, full-integer int8 with a uint8 input and a float output, or int8 in and out.

TensorFlow runs here in its own process because it and torch in one process fight over threads and
protobuf; the exporter calls this module with ``sys.executable -m``.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from sensorveil.export.person_detector.common import INPUT
from sensorveil.runtime.camera.learned import COCO_PERSON, DETECTOR_INPUT, DETECTOR_OUTPUT

TF_INPUT = "Preprocessor/map/TensorArrayStack/TensorArrayGatherV3:0"   # the resized float image, 0-255
TF_OUTPUTS = ("Postprocessor/raw_box_locations:0", "Postprocessor/raw_box_scores:0")  # decoded boxes, sigmoids
# the encodings form: what the SSD box coder decodes (ty, tx, th, tw per anchor) and the class logits
TF_ENCODINGS = ("Squeeze:0", "concat_1:0")
CENTERS = "Postprocessor/Decode/get_center_coordinates_and_sizes/"
TF_ANCHORS = tuple(CENTERS + name for name in ("add:0", "add_1:0", "sub_1:0", "sub:0"))   # ycenter, xcenter, h, w
TF_SCALES = tuple(f"Postprocessor/Decode/truediv{tail}/y" for tail in ("", "_1", "_2", "_3"))  # ty, tx, th, tw
TF_LOGIT_SCALE = "Postprocessor/scale_logits/y"     # the sigmoid's input is logit / this (1 in the SSD config)
FORMS = ("decoded", "encodings")


def tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    return tf


def read_frozen(tf, frozen: str):
    frozen_def = tf.compat.v1.GraphDef()
    with open(frozen, "rb") as handle:
        frozen_def.ParseFromString(handle.read())
    return frozen_def


def cut(frozen: str, out: str, form: str = "decoded", anchors: str | None = None) -> None:
    """The frozen graph from its resized image to one output: the decoded boxes and person scores
    (``decoded``), or the box encodings and person logits before the box coder (``encodings``; its anchors
    and scale factors, read out of the graph itself, go to ``anchors``, .npy)."""
    tf = tensorflow()
    frozen_def = read_frozen(tf, frozen)
    with tf.Graph().as_default() as graph:
        image = tf.compat.v1.placeholder(tf.float32, [1, *DETECTOR_INPUT, 3], name=INPUT)
        if form == "decoded":
            boxes, scores = tf.compat.v1.import_graph_def(frozen_def, input_map={TF_INPUT: image},
                                                          return_elements=list(TF_OUTPUTS), name="ssd")
            person = scores[:, :, COCO_PERSON:COCO_PERSON + 1]
            tf.concat([boxes, person, tf.ones_like(person) * float(COCO_PERSON)], axis=-1, name=DETECTOR_OUTPUT)
        else:
            encodings, logits = tf.compat.v1.import_graph_def(frozen_def, input_map={TF_INPUT: image},
                                                              return_elements=list(TF_ENCODINGS), name="ssd")
            tf.concat([encodings, logits[:, :, COCO_PERSON:COCO_PERSON + 1]], axis=-1, name=DETECTOR_OUTPUT)
    if anchors:
        np.save(anchors, box_coder(tf, frozen_def), allow_pickle=False)
    cut_def = tf.compat.v1.graph_util.extract_sub_graph(graph.as_graph_def(), [DETECTOR_OUTPUT])
    loops = sorted({node.op for node in cut_def.node if node.op in ("Enter", "Exit", "LoopCond", "NextIteration")})
    if loops:
        raise SystemExit(f"the cut person detector still holds loop ops {loops}: it would not run on the boards")
    with open(out, "wb") as handle:
        handle.write(cut_def.SerializeToString())


def box_coder(tf, frozen_def) -> np.ndarray:
    """(N + 1, 4) float32: the box coder's scale factors (ty, tx, th, tw), then each anchor's ycenter,
    xcenter, height and width, as the graph's own decoder computes them; refused if the logits are scaled."""
    constants = {node.name: node for node in frozen_def.node if node.op == "Const"}
    scales = [float(tf.make_ndarray(constants[name].attr["value"].tensor)) for name in TF_SCALES]
    logit_scale = float(tf.make_ndarray(constants[TF_LOGIT_SCALE].attr["value"].tensor))
    if logit_scale != 1.0:
        raise SystemExit(f"the detector's scores are sigmoid(logit / {logit_scale}); the runtime decodes "
                         "sigmoid(logit)")
    with tf.Graph().as_default() as graph:
        image = tf.compat.v1.placeholder(tf.float32, [1, *DETECTOR_INPUT, 3], name=INPUT)
        tensors = tf.compat.v1.import_graph_def(frozen_def, input_map={TF_INPUT: image},
                                                return_elements=list(TF_ANCHORS), name="ssd")
        with tf.compat.v1.Session(graph=graph) as session:
            columns = session.run(tensors, {image: np.zeros((1, *DETECTOR_INPUT, 3), np.float32)})
    anchors = np.stack([np.asarray(column, np.float32).reshape(-1) for column in columns], axis=1)
    return np.concatenate([np.asarray([scales], np.float32), anchors]).astype(np.float32)


def to_tflite(cut_graph: str, out: str, calibration: str | None = None, integer_output: bool = False) -> None:
    """The cut graph as a .tflite: fp32, or with ``calibration`` (N, 300, 300, 3) RGB frames full-integer
    int8: a uint8 input and a float output, or with ``integer_output`` (the encodings form, for the Edge TPU)
    an int8 input and an int8 output, nothing float left in the file."""
    tf = tensorflow()
    converter = tf.compat.v1.lite.TFLiteConverter.from_frozen_graph(
        cut_graph, [INPUT], [DETECTOR_OUTPUT], {INPUT: [1, *DETECTOR_INPUT, 3]})
    if calibration:
        frames = np.load(calibration).astype(np.float32)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([frame[None]] for frame in frames)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8 if integer_output else tf.uint8
        converter.inference_output_type = tf.int8 if integer_output else tf.float32
    with open(out, "wb") as handle:
        handle.write(converter.convert())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    cut_verb = verbs.add_parser("cut")
    cut_verb.add_argument("frozen")
    cut_verb.add_argument("out")
    cut_verb.add_argument("--form", choices=FORMS, default="decoded")
    cut_verb.add_argument("--anchors", default=None, help="the encodings form's box coder (.npy)")
    tflite_verb = verbs.add_parser("tflite")
    tflite_verb.add_argument("cut_graph")
    tflite_verb.add_argument("out")
    tflite_verb.add_argument("--calibration", default=None, help="(N, 300, 300, 3) RGB frames (.npy): int8")
    tflite_verb.add_argument("--integer-output", action="store_true", help="int8 in and out (the Edge TPU)")
    args = parser.parse_args()
    if args.verb == "cut":
        cut(args.frozen, args.out, args.form, args.anchors)
    else:
        to_tflite(args.cut_graph, args.out, args.calibration, args.integer_output)


if __name__ == "__main__":
    main()
