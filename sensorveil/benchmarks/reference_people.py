"""Reference people for the camera measurements: who is in a RAW frame, found offline by detectors that see
more than the pipeline does. The leak meter (leak_meter.py) and the detectors' recall (detector_recall.py)
score the pipeline against them; the crowded scene (crowd_scene.py) cuts its people out with them.

- ``offline_boxes``: person-sized blobs where the frame differs from the empty scene (the clip's temporal
  median, ``empty_scene``: people who pass are not in it; one who stands through the whole clip is);
- ``TiledPeople``: the bundle's learned detector graph on overlapping tiles at a low score, so small people
  are seen at a higher resolution than the pipeline runs;
- ``merge_boxes``: one box per person where two of them found the same one.
"""
import numpy as np

PERSON_DIFF = 25          # grey levels between raw and empty scene that make a pixel the person's
MIN_HEIGHT, MAX_HEIGHT = 16, 240
MEDIAN_EVERY = 4          # frames sampled for the empty scene
PEOPLE_MARGIN = 0.15      # share of a person's box grown each way when people are left out of the empty scene


def to_grey(frame):
    frame = np.asarray(frame)
    if frame.ndim == 2:
        return frame.astype(np.float32)
    return frame[..., :3].astype(np.float32) @ np.array([0.114, 0.587, 0.299], np.float32)


def empty_scene(frames, people=None, colour: bool = False):
    """The temporal median of every MEDIAN_EVERY-th frame, grey (``colour``: BGR, float). With ``people(index,
    frame)`` (boxes of the people in a frame), each sampled frame's people are left out of the median at their
    pixels (boxes grown by PEOPLE_MARGIN): a person who stands at one place for most of the clip is then not
    taken for the scene. A pixel covered in every sampled frame keeps the plain median."""
    sampled = frames[::MEDIAN_EVERY]
    stack = np.stack([f.astype(np.float32) if colour else to_grey(f) for f in sampled])
    plain = np.median(stack, axis=0)
    if people is None:
        return plain
    height, width = stack.shape[1:3]
    for k, frame in enumerate(sampled):
        for x, y, w, h in np.asarray(people(k * MEDIAN_EVERY, frame), np.int64).reshape(-1, 4):
            grow_x, grow_y = int(PEOPLE_MARGIN * w), int(PEOPLE_MARGIN * h)
            stack[k, max(y - grow_y, 0):min(y + h + grow_y, height), max(x - grow_x, 0):min(x + w + grow_x, width)] \
                = np.nan
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # all-NaN pixels: the plain median below
        scene = np.nanmedian(stack, axis=0)
    return np.where(np.isnan(scene), plain, scene)


def offline_boxes(raw, empty):
    """Person-sized blobs where the raw frame differs from the empty scene: (N, 4) int (x, y, w, h)."""
    import cv2
    mask = (np.abs(to_grey(raw) - empty) > PERSON_DIFF).astype(np.uint8) * 255
    mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, np.ones((9, 5), np.uint8))
    count, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    keep = [(x, y, w, h) for x, y, w, h, area in stats[1:count]
            if MIN_HEIGHT <= h <= MAX_HEIGHT and 0.8 <= h / max(w, 1) <= 6 and area >= 0.2 * w * h]
    return np.asarray(keep, dtype=np.int64).reshape(-1, 4)


def merge_boxes(first, second):
    """``first`` plus each box of ``second`` that is not mostly (half its area) inside one of ``first`` and
    does not mostly hold one of them: one box per person where two detectors found the same one."""
    from sensorveil.runtime.camera.learned import covered
    first, second = (np.asarray(b, dtype=np.int64).reshape(-1, 4) for b in (first, second))
    new = [box for box in second if not covered(box, first) and not any(covered(f, box[None]) for f in first)]
    return np.concatenate([first, np.asarray(new, np.int64).reshape(-1, 4)])


class TiledPeople(object):
    """A learned detector graph (``run_graph(graph, batch)``, the bundle's) on a grid of overlapping tiles,
    each resized to the graph's input: small people are seen at ``grid`` times the resolution the
    pipeline runs at. ``boxes(frame)`` -> (N, 4) int (x, y, w, h) at ``score`` or above."""

    def __init__(self, run_graph, graph="person-detector", grid=2, overlap=0.25, score=0.15):
        self.run_graph, self.graph, self.grid, self.overlap, self.score = run_graph, graph, grid, overlap, score

    label = "the learned detector on tiles"

    def __call__(self, index, frame):
        import cv2

        from sensorveil.runtime.camera.learned import DETECTOR_INPUT, people_boxes
        height, width = frame.shape[:2]
        tile_h, tile_w = int(height / (self.grid - (self.grid - 1) * self.overlap)), \
            int(width / (self.grid - (self.grid - 1) * self.overlap))
        found = np.zeros((0, 4), np.int64)
        for top in np.linspace(0, height - tile_h, self.grid).astype(int):
            for left in np.linspace(0, width - tile_w, self.grid).astype(int):
                tile = np.ascontiguousarray(frame[top:top + tile_h, left:left + tile_w, 2::-1])
                image = cv2.resize(tile, DETECTOR_INPUT[::-1], interpolation=cv2.INTER_LINEAR)
                boxes = people_boxes(np.asarray(self.run_graph(self.graph, image[None])), tile.shape, self.score)
                found = merge_boxes(found, boxes + np.array([left, top, 0, 0]))
        return found
