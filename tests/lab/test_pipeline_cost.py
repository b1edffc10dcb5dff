"""scripts/pipeline_cost.py --every / --motion-scale: the settings it times are the ones it was asked for."""
import numpy as np
import pytest

from tests.conftest import load_script

pytest.importorskip("cv2")

from sensorveil.runtime.camera import MotionPeopleDetector  # noqa: E402
from sensorveil.runtime.camera.learned import LearnedPeopleDetector  # noqa: E402


def pipeline_cost():
    return load_script("pipeline_cost")


def no_people(graph, batch):
    return np.zeros((1, 0, 6), np.float32)


def test_override_sets_the_graph_step_and_a_motion_detector_at_the_scale_asked():
    script = pipeline_cost()
    detector = LearnedPeopleDetector(no_people, every=3)
    kept = detector.motion
    script.override(detector, None, None)
    assert detector.every == 3 and detector.motion is kept          # nothing asked, nothing changed
    script.override(detector, 10, 0.25)
    assert detector.every == 10 and detector.motion is not kept and detector.motion.scale == 0.25
    assert script.settings_text(10, 0.25) == ("; learned graph every 10 frames (timing only); motion at 0.25 "
                                              "(timing only)")
    assert script.settings_text(None, None) == ""


def test_override_refuses_a_motion_only_bundle():
    with pytest.raises(SystemExit, match="learned detector"):
        pipeline_cost().override(MotionPeopleDetector(), 10, None)


def page_of(deface):
    result = {"total_cpu_ms": 10.0, "cpu_ms": {"decode the frame": 2.0, "learned person graph (amortized)": 8.0},
              "frames": 5, "clip": "c.avi", "bundle": "b", "backend": "onnxruntime"}
    record = {"command": "python scripts/pipeline_cost.py", "date": "2026-12-06 00:00 UTC", "host": "CPU A",
              "commit": "0" * 10, "dirty": False}
    return pipeline_cost().page(result, record, deface)


def test_the_goal_divides_by_deface_timed_on_the_same_frames_in_the_same_run():
    """The goal line's deface figure is the one this run measured (start-up taken out), named with its frames; the
    multiple and the budget follow from it."""
    text = page_of({"tool": "deface", "frames": 5, "cpu_ms_per_frame": 80.0, "command": "deface CLIP -o OUT.mp4"})
    assert "spends 80.0 CPU ms a frame on the same 5 frames, timed in this run" in text
    assert "the goal is 8.0 CPU ms a frame, and the pipeline spends 10.0 (8.0x deface's" in text
    assert "the goal leaves 6.0 ms a frame for finding them" in text
    assert "peers.json" not in text


def test_without_deface_the_page_says_it_has_no_goal_line():
    text = page_of(None)
    assert "deface was not timed (--no-deface): no goal line." in text and "Goal:" not in text
