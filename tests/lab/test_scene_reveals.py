"""RevealClock: which counter finds lie over blocks the quiet scene began showing recently."""
import numpy as np
import pytest

pytest.importorskip("cv2")

from sensorveil.runtime.camera.scene import QuietScene  # noqa: E402
from sensorveil_lab.camera_pipeline import outside_windows  # noqa: E402
from sensorveil_lab.scene_reveals import RevealClock  # noqa: E402


def test_a_box_over_a_block_revealed_within_the_window_is_counted_and_later_not():
    shape = (32, 96)
    scene = QuietScene(shape, horizon=3, block=8)
    clock = RevealClock(within=5)
    busy = np.zeros(shape, dtype=bool)
    busy[:, 48:] = True         # the right half never quiet: never revealed; the left a wide region, revealed
    frame = np.full(shape, 90, dtype=np.uint8)
    inside, outside = [[2, 2, 4, 12]], [[60, 2, 4, 12]]   # over blocks (0..1, 0) and (0..1, 7)
    counted = []
    for index in range(14):
        scene.update(frame, busy)
        clock.note(scene, index)
        counted.append((clock.over_recent(inside, index), clock.over_recent(outside, index)))
    revealed = int(clock.revealed_at[0, 0])
    assert revealed == 2                      # quiet from frame 0, shown once quiet for horizon (3) frames
    assert [c[0] for c in counted] == [0] * revealed + [1] * 6 + [0] * (14 - revealed - 6)
    assert all(c[1] == 0 for c in counted)
    assert not np.isfinite(clock.revealed_at[:, -1]).any()


def test_without_a_quiet_scene_there_is_nothing_to_tell():
    clock = RevealClock()
    clock.note(None, 0)
    assert clock.over_recent([[0, 0, 5, 10]], 0) is None


def test_a_counter_box_outside_every_privatized_window_is_told_apart():
    windows = [(10, 10, 30, 50)]
    boxes = [(12, 12, 10, 30), (40, 5, 8, 30), (25, 20, 10, 20)]    # inside, outside, half its columns in
    assert outside_windows(boxes, windows, (60, 60)) == [(40, 5, 8, 30)]
