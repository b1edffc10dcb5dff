"""The neutral scene is a fixed grain around mid-grey, not flat grey (decision 0029): made from a seed, so it holds
nothing of any frame, the same on every device and for every frame size (its cells are a share of the frame's
height); and with no gap asked on it, a substitute pasted there keeps its own pixels."""
import numpy as np
import pytest

pytest.importorskip("cv2")

from sensorveil.runtime.camera.composite import stand_out_colour, stand_out_people  # noqa: E402
from sensorveil.runtime.camera.detect import opencv  # noqa: E402
from sensorveil.runtime.camera.scene import (  # noqa: E402
    NEUTRAL_GRAIN,
    NEUTRAL_GREY,
    QuietScene,
    neutral_scene,
    starting_scene,
)


def test_the_neutral_scene_is_the_same_whatever_the_camera_showed():
    rng = np.random.default_rng(0)
    shape, everyone = (48, 64, 3), np.ones((48, 64), bool)        # every block busy: nothing may be revealed
    scenes = [QuietScene(shape, horizon=2), QuietScene(shape, horizon=2)]
    for _ in range(5):
        for scene in scenes:
            scene.update(rng.integers(0, 256, shape).astype(np.uint8), everyone)
    assert np.array_equal(scenes[0].image, scenes[1].image)
    assert np.array_equal(scenes[0].image, neutral_scene(shape))


def test_the_grain_is_grey_about_mid_grey_and_not_flat():
    grain = neutral_scene((360, 480, 3))
    assert (grain[..., 0] == grain[..., 1]).all() and (grain[..., 1] == grain[..., 2]).all()     # no colour
    assert abs(grain.mean() - NEUTRAL_GREY) < 2
    assert 0.5 * NEUTRAL_GRAIN < grain[..., 0].std() <= NEUTRAL_GRAIN     # pixels between the nodes vary less
    # a grain, not pixel noise: neighbouring pixels are close, pixels a cell apart are not
    grey = grain[..., 0].astype(float)
    assert np.abs(np.diff(grey, axis=1)).mean() < 0.3 * np.abs(grey[:, 16:] - grey[:, :-16]).mean()


def test_the_grain_keeps_its_size_to_the_frame_at_any_resolution():
    cv2 = opencv()
    large = cv2.resize(neutral_scene((720, 1280)), (640, 360), interpolation=cv2.INTER_AREA)
    assert np.abs(large.astype(float) - neutral_scene((360, 640))).mean() < 2


def test_callers_get_their_own_copy_of_the_neutral_scene():
    first = starting_scene((8, 8))
    first[:] = 0
    assert (starting_scene((8, 8)) == neutral_scene((8, 8))).all() and neutral_scene((8, 8)).min() > 0


def test_with_no_gap_asked_a_substitute_keeps_its_own_pixels_on_the_neutral_scene():
    rng = np.random.default_rng(1)
    background = neutral_scene((40, 60, 3)).copy()
    patches = [rng.integers(0, 256, (12, 5, 3)).astype(np.uint8), rng.integers(0, 256, (20, 8, 3)).astype(np.uint8)]
    corners = [(3, 4), (30, 10)]
    contrast = QuietScene((40, 60, 3)).contrast
    moved = stand_out_people(patches, corners, background, contrast)
    for patch, out, (x, y) in zip(patches, moved, corners):
        scene = opencv().cvtColor(background[y:y + patch.shape[0], x:x + patch.shape[1]], opencv().COLOR_BGR2GRAY)
        assert np.array_equal(out, np.maximum(patch, 1))                          # 0 means "not the person"
        assert np.array_equal(out, stand_out_colour(patch, scene, np.zeros(scene.shape, np.int16)))
