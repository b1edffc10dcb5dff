"""On a picture of the place a substitute keeps its own colours (decision 0016): the quiet scene asks for no gap
there (CAMERA_CONTRAST), and a gap of 0 leaves every pixel as the person has it, grey or colour. Since decision
0029 the neutral scene asks for none either; a gap a caller still asks for (QuietScene's neutral_contrast) moves
them on the neutral scene only."""
import numpy as np
import pytest

pytest.importorskip("cv2")

from sensorveil.runtime.camera.composite import stand_out, stand_out_colour, stand_out_people  # noqa: E402
from sensorveil.runtime.camera.scene import CAMERA_CONTRAST, NEUTRAL_CONTRAST, QuietScene  # noqa: E402

GAP = 70    # a gap a caller asks for on the neutral scene (decision 0011's, before the grain of decision 0029)


def test_no_gap_leaves_a_grey_person_as_they_are_even_where_a_shadow_rule_would_darken_them():
    scene = np.array([[120, 120, 240, 10, 200]], np.uint8)
    person = np.array([[130, 100, 150, 5, 1]], np.uint8)      # 150 on 240 would go below 0.45 x 240
    assert stand_out(person, scene, margin=0).tolist() == person.tolist()
    assert stand_out(person, scene, margin=np.zeros(scene.shape, np.int16)).tolist() == person.tolist()


def test_no_gap_leaves_a_colour_person_exactly_and_a_gap_still_moves_them():
    rng = np.random.default_rng(0)
    person = rng.integers(1, 256, (1, 200, 3)).astype(np.uint8)
    scene = rng.integers(0, 256, (1, 200)).astype(np.uint8)
    assert np.array_equal(stand_out_colour(person, scene, np.zeros((1, 200), np.int16)), person)
    assert not np.array_equal(stand_out_colour(person, scene, np.full((1, 200), 70, np.int16)), person)


def test_a_person_across_the_neutral_scene_and_the_camera_is_moved_on_the_neutral_scene_only():
    patch = np.full((4, 6, 3), 120, np.uint8)                     # close to the grey and to the camera's ground
    background = np.full((10, 10, 3), 128, np.uint8)
    contrast = np.full((10, 10), GAP, np.int16)
    contrast[:, 5:] = CAMERA_CONTRAST
    moved = stand_out_people([patch], [(2, 3)], background, contrast)[0]
    assert (moved[:, 3:] == 120).all()                            # columns 5.. of the frame: the camera's
    assert (np.abs(moved[:, :3].astype(int) - 128) >= GAP - 1).all()


def test_the_scene_asks_for_no_gap_on_the_camera_and_on_an_operators_still():
    frame, busy = np.full((16, 32), 90, np.uint8), np.zeros((16, 32), bool)
    assert NEUTRAL_CONTRAST == CAMERA_CONTRAST and (QuietScene(frame.shape).contrast == CAMERA_CONTRAST).all()
    scene = QuietScene(frame.shape, horizon=1, block=8, neutral_contrast=GAP)
    assert (scene.contrast == GAP).all()
    for _ in range(2):
        scene.update(frame, busy)
    assert (scene.contrast == CAMERA_CONTRAST).all()
    still = np.full((16, 32), 60, np.uint8)
    assert (QuietScene(frame.shape, still=still).contrast == CAMERA_CONTRAST).all()
