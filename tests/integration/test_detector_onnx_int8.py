"""The int8 ONNX person detector of int8 ONNX bundles (sensorveil.export.person_detector.onnx_int8): really quantized
with onnxruntime on walkway's frames, compared with the fp32 graph on frames it was not calibrated on,
refused when it does not match, and shipped in an exported int8 bundle that the runtime loads."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tests.conftest import WALKWAY
from tests.integration.test_person_detector import converter_or_skip

cv2 = pytest.importorskip("cv2")

from sensorveil.runtime.camera import learned  # noqa: E402


@pytest.fixture(scope="module")
def graphs():
    """(fp32 path, int8 path, calibration frames): quantized once (seconds), then read from the cache."""
    from sensorveil.export.person_detector import CALIBRATION_FRAMES, clip_frames
    from sensorveil.export.person_detector.onnx_int8 import detector_onnx_int8
    fp32 = converter_or_skip()
    frames = clip_frames(str(WALKWAY), CALIBRATION_FRAMES)
    return fp32, detector_onnx_int8(frames, progress=lambda line: None), frames


def held_out_frames(start=0.65, count=16):
    """300x300 RGB walkway frames from the clip's last part, which calibration (its first 60%) never reads."""
    from sensorveil.export.person_detector.frames import frames_at

    capture = cv2.VideoCapture(str(WALKWAY))
    total = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    capture.release()
    frames = frames_at(WALKWAY, np.linspace(int(total * start), total - 1, count).astype(int).tolist())
    assert len(frames) == count
    return frames


def test_the_int8_graph_finds_the_people_fp32_finds_on_frames_it_was_not_calibrated_on(graphs):
    """At the threshold the export matches on the calibration frames, the int8 graph's boxes cover nearly
    every person the fp32 graph finds on the clip's last part, without many more boxes."""
    from sensorveil.export.person_detector.onnx_int8 import detections, matched_score
    from sensorveil.runtime.camera import iou
    fp32, int8, calibration = graphs
    score = matched_score(fp32, int8, calibration)
    assert learned.SCORE_RANGE[0] <= score <= learned.DEFAULT_SCORE
    frames = held_out_frames()
    wanted = [learned.people_boxes(rows, frames.shape[1:3], learned.DEFAULT_SCORE) for rows in detections(fp32, frames)]
    found = [learned.people_boxes(rows, frames.shape[1:3], score) for rows in detections(int8, frames)]
    covered = sum(int((iou(a, b).max(1) >= 0.5).sum()) if len(b) else 0 for a, b in zip(wanted, found))
    total = sum(len(a) for a in wanted)
    print(f"int8 at {score}: covers {covered} of fp32's {total} people, {sum(len(b) for b in found)} boxes")
    assert total >= len(frames) and covered >= 0.95 * total                         # people there, and found
    assert sum(len(b) for b in found) <= 1.5 * total


def test_the_int8_graph_is_quantized_smaller_and_keeps_the_float_ports_and_tail(graphs):
    """Weights int8 (a third of the file), float32 image in and detections out like fp32 (so the runtime reads
    it unchanged), and the box decoding's Exp and the scores' Sigmoid left in float."""
    import onnx
    import onnxruntime as ort
    fp32, int8, _ = graphs
    assert int8.stat().st_size < 0.4 * fp32.stat().st_size
    model = onnx.load(str(int8))
    dequantized = {out for node in model.graph.node if node.op_type == "DequantizeLinear" for out in node.output}
    convs = [node for node in model.graph.node if node.op_type == "Conv"]
    assert convs and all(node.input[1] in dequantized for node in convs)            # int8 weights everywhere
    tail = [node for node in model.graph.node if node.op_type in ("Exp", "Sigmoid")]
    assert len(tail) == 3 and not any(name in dequantized for node in tail for name in node.input)
    session = ort.InferenceSession(str(int8), providers=["CPUExecutionProvider"])
    (port,), (output,) = session.get_inputs(), session.get_outputs()
    assert (port.name, port.type, port.shape) == ("image", "tensor(float)", [1, 300, 300, 3])
    assert (output.name, output.type) == ("detections", "tensor(float)")
    rows = session.run(None, {"image": np.zeros((1, 300, 300, 3), np.float32)})[0]
    assert rows.shape == (1, 1917, 6) and np.isfinite(rows).all()


def corrupted(int8, out, factor):
    """The int8 graph with every weight's dequantization scale multiplied by ``factor``: a wrongly quantized graph."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(str(int8))
    weights = {init.name for init in model.graph.initializer       # uint8 weights (U8U8), int8 in other recipes
               if init.data_type in (onnx.TensorProto.UINT8, onnx.TensorProto.INT8)}
    scales = {node.input[1] for node in model.graph.node if node.op_type == "DequantizeLinear"
              and node.input[0] in weights}
    for init in model.graph.initializer:
        if init.name in scales:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.float32(factor), init.name))
    onnx.save(model, str(out))
    return out


def test_an_int8_graph_that_does_not_match_fp32_is_refused(graphs, tmp_path, monkeypatch):
    """The real int8 graph passes its check; with its weights' scales off it fails the output bound, and with
    the bound lifted it still fails on the people it finds."""
    from sensorveil.export.person_detector import DetectorUnavailable
    from sensorveil.export.person_detector import onnx_int8 as int8_module
    fp32, int8, frames = graphs
    int8_module.check_int8_detector(fp32, int8, frames[::4])
    bad = corrupted(int8, tmp_path / "bad.onnx", 1.5)
    with pytest.raises(DetectorUnavailable, match="int8 ONNX graph does not match onnxruntime"):
        int8_module.check_int8_detector(fp32, bad, frames[::4])
    monkeypatch.setattr(int8_module, "INT8_TOLERANCE", float("inf"))
    with pytest.raises(DetectorUnavailable, match="finds other people than the fp32 graph"):
        int8_module.check_int8_detector(fp32, bad, frames[::4])


def test_the_matched_threshold_is_worked_out_once_per_graph_and_frames(graphs, monkeypatch):
    """The quantization's check and the export's graph entry ask for the same threshold: the second asking
    runs neither graph again; other frames do."""
    from sensorveil.export.person_detector import onnx_int8 as int8_module
    fp32, int8, frames = graphs
    runs = []
    counted = int8_module.detections
    monkeypatch.setattr(int8_module, "detections", lambda path, rows: runs.append(path) or counted(path, rows))
    monkeypatch.setattr(int8_module, "MATCHED", {})
    first = int8_module.matched_score(fp32, int8, frames[::4])
    assert int8_module.matched_score(fp32, int8, frames[::4]) == first and len(runs) == 2
    int8_module.matched_score(fp32, int8, frames[2::4])
    assert len(runs) == 4


def test_a_refused_int8_graph_is_never_cached(graphs, tmp_path, monkeypatch):
    """A quantization that comes out wrong raises one DetectorUnavailable and leaves no cached file for the next
    export to pick up."""
    from sensorveil.export.person_detector import DetectorUnavailable
    from sensorveil.export.person_detector import onnx_int8 as int8_module
    fp32, int8, frames = graphs
    fresh = frames[1::8]                                   # frames no earlier test cached a graph for
    monkeypatch.setattr(int8_module, "quantize_detector",
                        lambda source, frames, scratch: corrupted(int8, scratch / "bad.onnx", 1.5))
    with pytest.raises(DetectorUnavailable, match="does not match"):
        int8_module.detector_onnx_int8(fresh, progress=lambda line: None)
    assert not int8_module.cached_path(fp32, fresh).exists()


def test_the_fast_speed_runs_fp32_where_its_int8_graph_finds_other_people(graphs, tmp_path, monkeypatch):
    """--camera-speed fast takes the int8 graph where it finds fp32's people and otherwise ships the fp32 graph,
    saying so; a bundle exported at int8 precision still refuses that graph (its precision was asked for)."""
    from sensorveil.export.person_detector import DetectorJob, DetectorUnavailable, onnx_detector, writers
    fp32, int8, frames = graphs

    def job(folder, precision, lines):
        made = DetectorJob(tmp_path / folder, precision, str(WALKWAY), progress=lines.append, speed="fast")
        made.out_dir.mkdir()
        made.frames, made.fitted = frames, {"detector_score": learned.DEFAULT_SCORE}
        return made

    lines = []
    assert onnx_detector(job("matches", "fp32", lines))["precision"] == "int8"
    bad = corrupted(int8, tmp_path / "bad.onnx", 1.5)
    monkeypatch.setattr(writers, "detector_onnx_int8", lambda frames, progress: bad)
    lines = []
    entry = onnx_detector(job("other-people", "fp32", lines))
    assert entry == {"file": "person-detector.onnx", "precision": "fp32"}
    assert (tmp_path / "other-people" / entry["file"]).read_bytes() == fp32.read_bytes()
    assert any(line.startswith("the fast speed runs the fp32 person detector: ") and "other people" in line
               for line in lines), lines
    with pytest.raises(DetectorUnavailable, match="finds other people than the fp32 graph"):
        onnx_detector(job("asked-int8", "int8", []))


@pytest.fixture(scope="module")
def int8_bundle(graphs, tmp_path_factory):
    """An int8 ONNX camera bundle of a short PASS run on walkway (its detector: the cached int8 graph)."""
    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    where = tmp_path_factory.mktemp("int8-bundle")
    run = train_run("pass", "walkway", data_path=str(WALKWAY), out=where / "run", epochs=1, attacker_epochs=1,
                    dataset_options={"stride": 8}, settings={"substitutes": 32, "embedding_dim": 32,
                                                             "progress": False, "condition": "direction"})
    return export_run(run, "onnx", where / "bundle-int8", precision="int8", int8_check=False, calibration=32)


def walkway_frames(indices):
    capture, frames = cv2.VideoCapture(str(WALKWAY)), []
    for index in range(max(indices) + 1):
        ok, frame = capture.read()
        assert ok
        if index in indices:
            frames.append(frame)
    capture.release()
    return np.stack(frames)


@pytest.mark.exports
@pytest.mark.trains
def test_an_int8_onnx_bundle_ships_the_int8_detector_and_the_runtime_loads_it(graphs, int8_bundle, tmp_path):
    """onnx_detector: int8 jobs get the int8 file (precision int8, no anchors), others the fp32 one. An int8
    ONNX camera bundle carries it, and the runtime loads it and finds walkway's people with it."""
    from sensorveil.export.person_detector import DetectorJob, onnx_detector
    from sensorveil.runtime import Privatizer
    fp32, int8, _ = graphs
    entry = onnx_detector(DetectorJob(tmp_path, "fp32", str(WALKWAY), progress=lambda line: None))
    assert entry == {"file": "person-detector.onnx", "precision": "fp32"}
    privatizer = Privatizer.load(int8_bundle)
    entry = privatizer.pipeline.bundle.graph_artifact("onnxruntime", learned.DETECTOR_GRAPH)
    assert entry["precision"] == "int8" and learned.ANCHORS_KEY not in entry
    assert (int8_bundle / entry["file"]).read_bytes() == int8.read_bytes()
    # its own threshold, matched to fp32's people, is the one the bundle's pipeline runs with
    assert entry["score"] <= learned.DEFAULT_SCORE and privatizer.pipeline.declared.detector_score == entry["score"]
    detector = learned.LearnedPeopleDetector(privatizer.pipeline.run_graph)
    assert detector.box_coder is None
    assert len(detector.find(walkway_frames([100])[0])) >= 2


# run by the Jetson's Python: the runtime loads the bundle and its learned detector finds each frame's people
ON_THE_BOARD = """
import sys
import numpy as np
from sensorveil.runtime import Privatizer
from sensorveil.runtime.camera import learned
privatizer = Privatizer.load(sys.argv[1])
detector = learned.LearnedPeopleDetector(privatizer.pipeline.run_graph)
frames = np.load(sys.argv[2])
np.savez(sys.argv[3], **{"f%d" % k: detector.find(frame) for k, frame in enumerate(frames)})
print("onnxruntime", privatizer.describe()["library_version"])
"""


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_the_int8_bundle_finds_the_same_people_on_jetsons_python_3_6_and_onnxruntime_1_10(
        int8_bundle, tmp_path_factory, tmp_path):
    """JetPack 4.6's floor (Python 3.6, numpy 1.19, onnxruntime 1.10; OpenCV 4.6 from PyPI, the last wheel for
    3.6, stands in for the board's python3-opencv): the int8 QDQ graph loads and runs there, and finds the
    people this machine's onnxruntime finds (each box within IoU 0.8 of one here)."""
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.camera import iou
    from tests.integration.test_old_pythons import board_venv
    venv = board_venv(tmp_path_factory, "3.6",
                      ["numpy==1.19.5", "onnxruntime==1.10.0", "opencv-python-headless==4.6.0.66"])
    frames = walkway_frames([100, 300, 500])
    np.save(tmp_path / "frames.npy", frames)
    (tmp_path / "board.py").write_text(ON_THE_BOARD)
    result = subprocess.run([str(venv / "bin" / "python"), str(tmp_path / "board.py"), str(int8_bundle),
                             str(tmp_path / "frames.npy"), str(tmp_path / "boxes.npz")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert result.returncode == 0 and "onnxruntime 1.10" in result.stdout, result.stdout[-3000:]
    board = np.load(tmp_path / "boxes.npz")
    detector = learned.LearnedPeopleDetector(Privatizer.load(int8_bundle).pipeline.run_graph)
    for k, frame in enumerate(frames):
        here, there = detector.find(frame), board["f%d" % k]
        assert len(here) >= 2 and len(there) == len(here), (k, here, there)
        assert (iou(there, here).max(1) >= 0.8).all(), (k, here, there)
