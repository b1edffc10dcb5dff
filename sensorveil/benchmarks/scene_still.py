"""A picture of the empty place from a recording of it, for `sensorveil run/preview/camera-audit --scene-still`:
the clip's colour median with the people a camera bundle's learned detector finds (on 2x2 tiles, as the camera
audit's reference people) left out, so a person who stands at one place for most of the clip is not taken for the
scene. Whatever the still shows is released: the operator looks at it before using it (a person the detector
missed in every sampled frame would be in it; docs/decisions/0015-scene-still-and-proportions.md)."""
import time

import numpy as np

PROGRESS_EVERY_S = 10.0


class Announced(object):
    """A people finder that says how far it has come (a still of a long clip takes minutes)."""

    def __init__(self, find, sampled: int, log):
        self.find, self.sampled, self.log = find, sampled, log
        self.done, self.said = 0, time.monotonic()

    def __call__(self, index, frame):
        boxes = self.find(index, frame)
        self.done += 1
        if self.log is not None and time.monotonic() - self.said >= PROGRESS_EVERY_S:
            self.log("scene still: {} of {} sampled frames searched for people".format(self.done, self.sampled))
            self.said = time.monotonic()
        return boxes


def scene_still(bundle, clip, frames=None, log=None) -> np.ndarray:
    """The empty place as BGR uint8: the clip's median with the bundle's detected people left out. A bundle
    without the learned person detector is refused: its median would keep whoever stood still."""
    from sensorveil.benchmarks.clip_audit import read_clip
    from sensorveil.benchmarks.reference_people import MEDIAN_EVERY, TiledPeople, empty_scene
    from sensorveil.runtime.camera.learned import DETECTOR_GRAPH
    from sensorveil.runtime.errors import BundleError
    from sensorveil.runtime.stream import load_for_stream
    privatizer = load_for_stream(bundle)
    if DETECTOR_GRAPH not in privatizer.pipeline.graphs:
        raise BundleError("{}: carries no learned person detector (graph {!r}); expected a camera bundle exported "
                          "with one, which finds the people to leave out".format(bundle, DETECTOR_GRAPH))
    images = read_clip(clip, frames)
    if not images:
        raise BundleError("{}: no frame could be read; expected a video of the place".format(clip))
    people = Announced(TiledPeople(privatizer.pipeline.run_graph), len(images[::MEDIAN_EVERY]), log)
    still = empty_scene(images, people, colour=True)
    return np.clip(np.round(still), 0, 255).astype(np.uint8)
