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
