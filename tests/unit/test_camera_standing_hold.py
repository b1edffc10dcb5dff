"""A person the learned graph found whole who stops and then goes unseen by both detectors (seen from behind, and
too still for motion) keeps their box while they stand, so they keep their substitute and stay in the count; the
box goes as soon as they leave. A walker the graph loses is not held: their old box would be a second substitute."""
import numpy as np
import pytest

pytest.importorskip("cv2")

from sensorveil.runtime.camera.detect import MotionPeopleDetector  # noqa: E402
from sensorveil.runtime.camera.hold import StandingHold  # noqa: E402
from sensorveil.runtime.camera.learned import LearnedPeopleDetector  # noqa: E402
from sensorveil.runtime.camera.pipeline import PersonCrops  # noqa: E402

SCENE_GREY, DARK = 120, 20


def striped_person_frames(stand, gone):
    """Grey 120x160 frames: empty for 25, then a 12x36 person in dark and scene-grey columns walks in from the left
    (2 px a frame for 30 frames), stands for ``stand`` frames, and is gone for ``gone``. Their stripes are one pixel
    wide, so the motion detector's cleaning removes every blob of them: motion alone never finds them."""
    rng = np.random.default_rng(0)
    frames = []
    for k in range(25 + 30 + stand + gone):
        frame = np.clip(SCENE_GREY + rng.normal(0, 2, (120, 160)), 0, 255).astype(np.uint8)
        if 25 <= k < 55 + stand:
            x = 10 + 2 * min(k - 25, 30)
            frame[60:96, x:x + 12:2] = DARK
        frames.append(frame)
    return frames


class DarkPixelsGraph(object):
    """A stand-in for the SSD: one person, the box of the tile's dark pixels, while ``finding`` is True."""

    def __init__(self):
        self.finding = True

    def __call__(self, graph, batch):
        dark = batch[0, :, :, 0] < 60
        if not self.finding or not dark.any():
            return np.zeros((1, 0, 6), dtype=np.float32)
        rows, cols = np.nonzero(dark.any(axis=1))[0], np.nonzero(dark.any(axis=0))[0]
        side = float(batch.shape[1])
        return np.array([[[rows[0] / side, cols[0] / side, (rows[-1] + 1) / side, (cols[-1] + 1) / side, 0.9, 1]]],
                        dtype=np.float32)


def run(frames, graph, blind_from):
    pipeline = PersonCrops(detector=LearnedPeopleDetector(graph, motion=MotionPeopleDetector()), paste="cut-out")
    found = []
    for k, frame in enumerate(frames):
        graph.finding = k < blind_from
        _, context = pipeline.prepare(frame)
        found.append(context.boxes)
    return found


def covers_the_person(boxes):
    return [b for b in boxes if b[0] <= 72 and b[0] + b[2] >= 80 and b[1] <= 64 and b[1] + b[3] >= 92]


def test_a_person_who_stops_and_goes_unseen_keeps_one_box_until_they_leave():
    stand, gone = 200, 20
    frames = striped_person_frames(stand, gone)
    found = run(frames, DarkPixelsGraph(), blind_from=55 + 20)      # the graph loses them 20 frames after they stop
    for k in range(75, 55 + stand):
        assert len(found[k]) == 1 and covers_the_person(found[k]), "frame {}: {}".format(k, found[k].tolist())
    for k in range(55 + stand + 2, len(frames)):
        assert len(found[k]) == 0, "frame {} after they left: {}".format(k, found[k].tolist())


def test_without_the_hold_that_person_is_lost():
    """The case is real: with the hold switched off, the pipeline finds nobody while they stand unseen."""
    frames = striped_person_frames(100, 0)
    graph = DarkPixelsGraph()
    pipeline = PersonCrops(detector=LearnedPeopleDetector(graph, motion=MotionPeopleDetector()), paste="cut-out")
    pipeline.hold.after = 10 ** 9
    for k, frame in enumerate(frames):
        graph.finding = k < 75
        _, context = pipeline.prepare(frame)
    assert len(context.boxes) == 0


def test_a_walker_whose_box_moves_between_sightings_is_not_held():
    hold = StandingHold(max_hold=100)
    foreground = np.full((120, 160), 255, dtype=np.uint8)   # evidence everywhere: only stillness may decide
    for k in range(6):
        box = np.array([[10 + 12 * k, 60, 12, 36]])
        boxes, held = hold.extend(box, {0: [box[0], 0]}, foreground, whole=[True])
        hold.seen([0], boxes, held, [True], {0: None})
    boxes, held = hold.extend(np.zeros((0, 4)), {0: [box[0], 0]}, foreground, whole=[])
    assert not held.any() and len(boxes) == 0


def test_a_held_box_ends_after_max_hold_frames():
    hold = StandingHold(max_hold=5)
    foreground = np.full((120, 160), 255, dtype=np.uint8)
    box = np.array([[70, 60, 12, 36]])
    for _ in range(5):
        boxes, held = hold.extend(box, {0: [box[0], 0]}, foreground, whole=[True])
        hold.seen([0], boxes, held, [True], {0: None})
    kept = [hold.extend(np.zeros((0, 4)), {0: [box[0], 0]}, foreground, whole=[])[1].any() for _ in range(8)]
    assert kept == [True] * 5 + [False] * 3
