"""The leak meter: does a released camera frame still show a person the pipeline did not privatize?

An offline detector finds the people in each RAW frame, independently of the pipeline and with more to go
on than it has: the clip's temporal median as the empty scene (people who pass are not in it), the pixels
that differ from it, person-sized blobs of them. For each such box the pipeline did not cover with one of its
own (its substitute is the mechanism's output, which the audit measures), the meter looks at the person's own
pixels (raw differs from the empty scene by more than PERSON_DIFF) and calls the box leaking when the
released pixels there are closer to the raw frame than to the empty scene. A person who stands through the
whole clip is in the median too, so this meter cannot see them either; a learned detector could (issue 29).
"""
import numpy as np

PERSON_DIFF = 25          # grey levels between raw and empty scene that make a pixel the person's
MIN_PERSON_PIXELS = 20    # a box with fewer person pixels says nothing either way
MIN_HEIGHT, MAX_HEIGHT = 16, 240
MEDIAN_EVERY = 4          # frames sampled for the empty scene


def to_grey(frame):
    frame = np.asarray(frame)
    if frame.ndim == 2:
        return frame.astype(np.float32)
    return frame[..., :3].astype(np.float32) @ np.array([0.114, 0.587, 0.299], np.float32)


def empty_scene(frames):
    """The temporal median of every MEDIAN_EVERY-th frame, grey."""
    return np.median(np.stack([to_grey(f) for f in frames[::MEDIAN_EVERY]]), axis=0)


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


def box_leaks(raw_grey, released_grey, empty, box) -> "bool | None":
    """True: the released person pixels are nearer the raw frame than the empty scene; None: too few pixels."""
    x, y, w, h = (int(v) for v in box)
    r, x_raw, e = (a[y:y + h, x:x + w] for a in (released_grey, raw_grey, empty))
    person = np.abs(x_raw - e) > PERSON_DIFF
    if person.sum() < MIN_PERSON_PIXELS:
        return None
    return bool(np.abs(r - x_raw)[person].mean() < np.abs(r - e)[person].mean())


class LeakMeter(object):
    """``add(index, raw, released, pipeline_boxes)`` per frame, then ``figures()``."""

    def __init__(self, empty):
        self.empty = empty
        self.boxes = self.unprivatized = self.leaking = self.measured = 0
        self.worst = {"frame": None, "leaking": 0, "boxes": []}

    def add(self, index, raw, released, pipeline_boxes):
        from sensorveil.runtime.camera import iou
        found = offline_boxes(raw, self.empty)
        self.boxes += len(found)
        if len(found) and len(pipeline_boxes):
            found = found[iou(found, pipeline_boxes).max(1) < 0.3]
        self.unprivatized += len(found)
        raw_grey, released_grey = to_grey(raw), to_grey(released)
        verdicts = [(box, box_leaks(raw_grey, released_grey, self.empty, box)) for box in found]
        leaking = [box.tolist() for box, leak in verdicts if leak]
        self.measured += sum(leak is not None for _, leak in verdicts)
        self.leaking += len(leaking)
        if len(leaking) > self.worst["leaking"]:
            self.worst = {"frame": int(index), "leaking": len(leaking), "boxes": leaking}

    def figures(self) -> dict:
        return {"offline_boxes": self.boxes, "not_privatized_boxes": self.unprivatized,
                "measured_boxes": self.measured, "leaking_boxes": self.leaking,
                "leaking_share": self.leaking / self.boxes if self.boxes else 0.0, "worst_frame": self.worst}
