"""A picture of the empty place from a recording of it, for `sensorveil run/preview/camera-audit --scene-still`:
the clip's colour median with the people a camera bundle's learned detector finds (on the whole frame and on 2x2
tiles, as the camera audit's reference people; reference_people.empty_scene) left out, so a person who stands at
one place for most of the clip is not taken for the scene. Whatever the still shows is released: the operator
looks at it before using it (a person the detector missed in every sampled frame and its neighbours would be in
it; docs/decisions/0015-scene-still-and-proportions.md, 0017-reference-people-whole.md)."""
import numpy as np


def scene_still(bundle, clip, frames=None, log=None) -> np.ndarray:
    """The empty place as BGR uint8: the clip's median with the bundle's detected people left out. A bundle
    without the learned person detector is refused: its median would keep whoever stood still."""
    from sensorveil.benchmarks.clip_audit import read_clip
    from sensorveil.benchmarks.reference_people import MEDIAN_EVERY, Announced, TiledPeople, empty_scene
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
    people = Announced(TiledPeople(privatizer.pipeline.run_graph), len(images[::MEDIAN_EVERY]), log,
                       "scene still")
    still = empty_scene(images, people, colour=True)
    return np.clip(np.round(still), 0, 255).astype(np.uint8)
