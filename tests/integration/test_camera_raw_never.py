"""Nothing of the camera's frame goes out as it is, whatever the paste mode: the quiet scene surrounds the
privatized people from the first frame (neutral while the detectors warm up), and a camera entry whose paste
mode does not fit its bank is refused at load."""
import numpy as np
import pytest

from sensorveil.runtime.camera import PersonCrops
from sensorveil.runtime.camera.scene import neutral_scene
from tests.integration.test_camera import read_frames, walkway


def test_a_window_paste_releases_the_quiet_scene_around_its_windows_never_the_frame():
    crops = PersonCrops(paste="window")
    frames = read_frames(walkway(), 40)
    windows_seen = 0
    for k, frame in enumerate(frames):
        batch, context = crops.prepare(frame)
        out = crops.restore(batch, context)      # the crops as they are: only the surroundings are in question
        inside = np.zeros(frame.shape[:2], bool)
        for x0, y0, x1, y1 in context.windows:
            inside[max(y0, 0):max(y1, 0), max(x0, 0):max(x1, 0)] = True
        scene = crops.empty_scene(frame)
        assert (out[~inside] == scene[~inside]).all(), f"frame {k}: the camera's pixels around the windows"
        windows_seen += len(context.windows)
        if k < 20:     # the motion model is still learning: no window yet, the whole frame the neutral scene
            assert len(context.windows) == 0 and (out == neutral_scene(out.shape)).all(), f"frame {k}"
    assert windows_seen > 0


def camera_manifest(paste, cut_out):
    manifest = {"input": {"sample_shape": [128, 64]},
                "pipeline": [{"kind": "model", "graph": "model"}, {"kind": "substitution", "cut_out": cut_out}],
                "camera": {"frame": "person-crops", "detector": "motion", "crop_shape": [128, 64]}}
    if paste is not None:
        manifest["camera"]["paste"] = paste
    return manifest


@pytest.mark.parametrize("paste, cut_out", [("window", True), (None, True), ("cut-out", False)])
def test_a_paste_mode_that_does_not_fit_the_bank_is_refused(paste, cut_out):
    from sensorveil.runtime.manifest_fields import ManifestError
    from sensorveil.runtime.schema import validate_declared
    with pytest.raises(ManifestError, match="camera.paste"):
        validate_declared("bundle", camera_manifest(paste, cut_out))
    validate_declared("bundle", camera_manifest("cut-out" if cut_out else "window", cut_out))    # the fitting one
