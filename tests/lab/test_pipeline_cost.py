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


def test_a_deface_figure_from_another_machine_is_named_as_such():
    """The goal line divides deface's CPU time by the pipeline's: from two machines it says so, not silently."""
    script = pipeline_cost()
    result = {"total_cpu_ms": 10.0, "cpu_ms": {"decode the frame": 10.0}, "frames": 5, "clip": "c.avi",
              "bundle": "b", "backend": "onnxruntime"}
    record = {"command": "python scripts/pipeline_cost.py", "date": "2026-12-06 00:00 UTC", "host": "CPU A",
              "commit": "0" * 10, "dirty": False}
    same = script.page(result, record, (80.0, "CPU A"))
    other = script.page(result, record, (80.0, "CPU B"))
    assert "on CPU A" in same and "another machine" not in same
    assert "another machine than this page (CPU A)" in other and "docs/camera_speed.md" in other
