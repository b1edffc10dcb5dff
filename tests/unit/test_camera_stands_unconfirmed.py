"""A person whom motion found walking in, whom the learned graph never calls a person, and who then stands:
kept out of the background model as "walked in", so they stay found and out of the released scene.

Dropping that protection for people the graph never vouched for looks like a cure for the motion fragments of a
camera whose exposure follows a near person (Intel's one-by-one clip), but it releases this person: the
background model learns them, nobody is found there any more, and after the quiet scene's horizon the grey
block they stand in, never shown before, is revealed with them in it.

They get no substitute once they have stood still for ``STILL_FRAMES`` (decision 0028): no graph vouched for
them, so they are left out of the count, but their place stays busy, so they are still never released."""
import numpy as np
import pytest

pytest.importorskip("cv2")

from sensorveil.runtime.camera.detect import MotionPeopleDetector  # noqa: E402
from sensorveil.runtime.camera.evidence import STILL_FRAMES  # noqa: E402
from sensorveil.runtime.camera.learned import LearnedPeopleDetector  # noqa: E402
from sensorveil.runtime.camera.pipeline import PersonCrops  # noqa: E402
from tests.camera_scenes import PERSON_GREY, STANDS_AT, walk_in_and_stand  # noqa: E402


def test_a_person_the_graph_never_finds_who_walks_in_and_stands_is_never_released():
    nobody = np.zeros((1, 0, 6), dtype=np.float32)          # the graph finds no one in any frame
    learned = LearnedPeopleDetector(lambda graph, batch: nobody, motion=MotionPeopleDetector())
    pipeline = PersonCrops(detector=learned, paste="cut-out")
    frames = walk_in_and_stand(200)                          # past the quiet scene's 100-frame horizon
    for k, frame in enumerate(frames):
        crops, context = pipeline.prepare(frame)
        released = pipeline.restore(np.zeros_like(crops), context)      # substitutes that hold nobody
        # nowhere near the person's grey: the camera's ground or the neutral grain (about 95-155)
        assert np.abs(released[STANDS_AT].astype(float) - PERSON_GREY).min() > 60, "frame {}".format(k)
    tracked = [box for box, _ in pipeline.tracker.tracks.values()]
    assert len(tracked) == 1, "still found: motion's model did not learn them"
    assert len(context.boxes) == 0, "no substitute for a person no graph found, standing {} frames".format(STILL_FRAMES)
