"""The crowded test scene made from a clip's own people (lab/sensorveil_lab/crowd_scene.py): the people of
several moments in one frame, a group standing throughout, and each pasted person's box recorded."""
import json

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from sensorveil_lab.crowd_scene import build_crowd, write_crowd  # noqa: E402


def two_walkers(frames=80):
    """A grey scene with two dark people walking right at different heights."""
    rng = np.random.default_rng(0)
    clip = []
    for k in range(frames):
        frame = np.clip(150 + rng.normal(0, 2, (120, 200, 3)), 0, 255).astype(np.uint8)
        for row, start in ((20, 10), (70, 60)):
            x = (start + 2 * k) % 170
            frame[row:row + 36, x:x + 12] = 40
        clip.append(frame)
    return clip


def test_each_crowd_frame_holds_every_layer_s_people_and_the_standing_group():
    clip = two_walkers()
    crowd, truth, standing, empty = build_crowd(clip, layers=3, standing=1)
    assert abs(float(empty.mean()) - 150) < 2                    # nobody in the empty scene
    assert len(crowd) == len(clip) and len(standing) == 1
    assert all(len(boxes) == 3 * 2 + 1 for boxes in truth)
    for frame, boxes in zip(crowd[::10], truth[::10]):      # every recorded box holds a dark person
        for x, y, w, h in boxes:
            assert frame[y:y + h, x:x + w].mean() < 110
    assert (np.asarray(truth[0][0]) == np.asarray(truth[-1][0])).all()    # the standing person stays put


def test_the_clip_and_its_truth_are_written(tmp_path):
    source = tmp_path / "walkers.avi"
    writer = cv2.VideoWriter(str(source), cv2.VideoWriter_fourcc(*"MJPG"), 10, (200, 120))
    for frame in two_walkers(40):
        writer.write(frame)
    writer.release()
    record = write_crowd(source, tmp_path / "crowd.avi", layers=2, standing=1)
    saved = json.loads((tmp_path / "crowd.avi.json").read_text())
    assert saved["frames"] == 40 == record["frames"] and len(saved["boxes"]) == 40
    assert cv2.VideoCapture(str(tmp_path / "crowd.avi")).read()[0]
    assert cv2.imread(str(tmp_path / "crowd.avi.empty.png")).shape == (120, 200, 3)
