"""A substitute is pasted for a track the learned graph has found, or one that moves: a motion blob that no graph
calls a person and that stays where it is (a wall flickering where someone stood) gets none after STILL_FRAMES,
while a walker only motion finds keeps theirs on every frame (decision 0028)."""
import numpy as np
import pytest

pytest.importorskip("cv2")

from sensorveil.runtime.camera.detect import MotionPeopleDetector  # noqa: E402
from sensorveil.runtime.camera.evidence import STILL_FRAMES, PersonEvidence  # noqa: E402
from sensorveil.runtime.camera.learned import LearnedPeopleDetector  # noqa: E402
from sensorveil.runtime.camera.pipeline import PersonCrops  # noqa: E402

NOBODY = np.zeros((1, 0, 6), dtype=np.float32)     # the graph finds no one in any frame


def frames_with(draw, count=120):
    """Grey 120x160 frames of a still scene; ``draw(frame, k)`` adds what happens in frame k."""
    rng = np.random.default_rng(0)
    frames = []
    for k in range(count):
        frame = np.clip(120 + rng.normal(0, 2, (120, 160)), 0, 255).astype(np.uint8)
        draw(frame, k)
        frames.append(frame)
    return frames


def pasted_boxes(frames, still_frames=STILL_FRAMES):
    """The boxes pasted in each frame; ``still_frames`` of 10**9: no track ever loses its substitute."""
    pipeline = PersonCrops(detector=LearnedPeopleDetector(lambda graph, batch: NOBODY, motion=MotionPeopleDetector()),
                           paste="cut-out")
    pipeline.evidence.still_frames = still_frames
    return [pipeline.prepare(frame)[1].boxes for frame in frames]


def flicker(frame, k):
    if k >= 40:      # a patch of wall that flickers in place from frame 40 on, a new grey each frame
        frame[20:56, 100:112] = np.random.default_rng(k).choice([20, 230])


def walk(frame, k):
    if k >= 25:      # a dark person walking right, 1 px a frame, the whole clip
        x = 5 + (k - 25)
        frame[60:96, x:x + 12] = 20


def test_a_blob_that_stays_put_and_no_graph_confirms_loses_its_substitute():
    frames = frames_with(flicker)
    every = [k for k, boxes in enumerate(pasted_boxes(frames, 10 ** 9)) if len(boxes)]
    assert len(every) > STILL_FRAMES + 4, "motion found the flicker too seldom: the case is not made"
    with_box = [k for k, boxes in enumerate(pasted_boxes(frames)) if len(boxes)]
    assert len(with_box) <= STILL_FRAMES + 2, with_box


def test_a_walker_only_motion_finds_keeps_a_substitute_while_walking():
    frames = frames_with(walk)
    every = pasted_boxes(frames, 10 ** 9)
    assert sum(len(boxes) for boxes in every) > 50, "motion found the walker too seldom: the case is not made"
    found = pasted_boxes(frames)
    assert all(np.array_equal(a, b) for a, b in zip(found, every))


def test_a_track_the_graph_found_once_keeps_its_substitute_standing():
    evidence = PersonEvidence()
    box = np.array([[10, 10, 12, 36]])
    assert evidence.paste([7], box, [True], live=[7]).all()
    for _ in range(3 * STILL_FRAMES):
        assert evidence.paste([7], box, [False], live=[7]).all()


def test_without_a_graph_every_box_is_pasted():
    assert PersonEvidence().paste([1, 2], np.zeros((2, 4)), None, live=[1, 2]).all()
