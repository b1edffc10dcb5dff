"""Reference people for the camera measurements: who is in a RAW frame, found offline by detectors that see
more than the pipeline does. The leak meter (leak_meter.py) and the detectors' recall (detector_recall.py)
score the pipeline against them; the crowded scene (crowd_scene.py) cuts its people out with them.

- ``offline_boxes``: person-sized blobs where the frame differs from the empty scene (the clip's temporal
  median, ``empty_scene``: people who pass are not in it; one who stands through the whole clip is);
- ``TiledPeople``: the bundle's learned detector graph on the whole frame and on overlapping tiles at a low
  score, so small people are seen at a higher resolution than the pipeline runs and people taller than a tile
  whole;
- ``merge_boxes``: one box per person where two of them found the same one.
"""
import time

import numpy as np

PERSON_DIFF = 25          # grey levels between raw and empty scene that make a pixel the person's
MIN_HEIGHT, MAX_HEIGHT = 16, 240
MEDIAN_EVERY = 4          # frames sampled for the empty scene
PEOPLE_MARGIN = 0.15      # share of a person's box grown each way when people are left out of the empty scene
PROGRESS_EVERY_S = 10.0   # how often a long search for people says how far it has come
PEOPLE_REACH = 1          # sampled frames each way a person found in one is left out of too (detectors flicker)


def to_grey(frame):
    frame = np.asarray(frame)
    if frame.ndim == 2:
        return frame.astype(np.float32)
    return frame[..., :3].astype(np.float32) @ np.array([0.114, 0.587, 0.299], np.float32)


def empty_scene(frames, people=None, colour: bool = False):
    """The temporal median of every MEDIAN_EVERY-th frame, grey (``colour``: BGR, float). With ``people(index,
    frame)`` (boxes of the people in a frame), each sampled frame's people are left out of the median at their
    pixels (boxes grown by PEOPLE_MARGIN), and out of the PEOPLE_REACH sampled frames either side: a person who
    stands at one place for most of the clip is then not taken for the scene, even where the detector misses
    them in a frame now and then (one-by-one-person-detection: people at a table, each found in most frames and
    missed in some, left a ghost at the table without the reach). Where the reach leaves no sampled frame (a
    place empty only between one person and the next), the frames the people were found in alone are left out;
    a pixel covered in every sampled frame keeps the plain median."""
    sampled = frames[::MEDIAN_EVERY]
    stack = np.stack([f.astype(np.float32) if colour else to_grey(f) for f in sampled])
    plain = np.median(stack, axis=0)
    if people is None:
        return plain
    found = people_masks(sampled, people, stack.shape[1:3])
    reached = found.copy()
    for shift in range(1, PEOPLE_REACH + 1):
        reached[shift:] |= found[:-shift]
        reached[:-shift] |= found[shift:]
    nothing_left = reached.all(axis=0)
    found_only = stack[:, nothing_left]               # those pixels, with the found frames alone left out
    found_only[found[:, nothing_left]] = np.nan
    stack[reached] = np.nan
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # all-NaN pixels: the plain median below
        scene = np.nanmedian(stack, axis=0)
        scene[nothing_left] = np.nanmedian(found_only, axis=0)
    return np.where(np.isnan(scene), plain, scene)


def people_masks(sampled, people, shape) -> np.ndarray:
    """(len(sampled), H, W) bool: each sampled frame's people boxes, grown by PEOPLE_MARGIN."""
    height, width = shape
    masks = np.zeros((len(sampled), height, width), bool)
    for k, frame in enumerate(sampled):
        for x, y, w, h in np.asarray(people(k * MEDIAN_EVERY, frame), np.int64).reshape(-1, 4):
            grow_x, grow_y = int(PEOPLE_MARGIN * w), int(PEOPLE_MARGIN * h)
            masks[k, max(y - grow_y, 0):min(y + h + grow_y, height), max(x - grow_x, 0):min(x + w + grow_x, width)] \
                = True
    return masks


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
    """A learned detector graph (``run_graph(graph, batch)``, the bundle's) on the whole frame and on each grid
    of ``grids`` (g x g overlapping tiles), each resized to the graph's input, merged: small people are seen at
    g times the resolution the pipeline runs at, and a person taller than a tile whole on the frame (tiles
    alone found only parts of people standing near the camera, and the empty scene kept the rest of them).
    ``boxes(frame)`` -> (N, 4) int (x, y, w, h) at ``score`` or above."""

    def __init__(self, run_graph, graph="person-detector", grids=(1, 2), overlap=0.25, score=0.15):
        self.run_graph, self.graph, self.grids, self.overlap, self.score = run_graph, graph, grids, overlap, score

    label = "the learned detector on the frame and on tiles"

    def __call__(self, index, frame):
        found = np.zeros((0, 4), np.int64)
        for grid in self.grids:
            found = merge_boxes(found, self.on_tiles(frame, grid))
        return found

    def on_tiles(self, frame, grid: int):
        import cv2

        from sensorveil.runtime.camera.learned import DETECTOR_INPUT, people_boxes
        height, width = frame.shape[:2]
        tile_h, tile_w = int(height / (grid - (grid - 1) * self.overlap)), \
            int(width / (grid - (grid - 1) * self.overlap))
        found = np.zeros((0, 4), np.int64)
        for top in np.linspace(0, height - tile_h, grid).astype(int):
            for left in np.linspace(0, width - tile_w, grid).astype(int):
                tile = np.ascontiguousarray(frame[top:top + tile_h, left:left + tile_w, 2::-1])
                image = cv2.resize(tile, DETECTOR_INPUT[::-1], interpolation=cv2.INTER_LINEAR)
                boxes = people_boxes(np.asarray(self.run_graph(self.graph, image[None])), tile.shape, self.score)
                found = merge_boxes(found, boxes + np.array([left, top, 0, 0]))
        return found


class Announced(object):
    """A people finder that says how far it has come (``what``: who is asking; an empty scene of a long clip
    takes minutes)."""

    def __init__(self, find, sampled: int, log, what: str):
        self.find, self.sampled, self.log, self.what = find, sampled, log, what
        self.done, self.said = 0, time.monotonic()

    def __call__(self, index, frame):
        boxes = self.find(index, frame)
        self.done += 1
        if self.log is not None and time.monotonic() - self.said >= PROGRESS_EVERY_S:
            self.log("{}: {} of {} sampled frames searched for people".format(self.what, self.done, self.sampled))
            self.said = time.monotonic()
        return boxes
