"""The leak meter: does a released camera frame still show a person the pipeline did not privatize?

An offline detector finds the people in each RAW frame, independently of the pipeline and with more to go
on than it has: the clip's temporal median as the empty scene (people who pass are not in it), the pixels
that differ from it, person-sized blobs of them. For each such box the pipeline did not cover with one of its
own (its substitute is the mechanism's output, which the audit measures), the meter looks at the person's own
pixels (raw differs from the empty scene by more than PERSON_DIFF) and calls the box leaking when the
released pixels there correlate with the raw frame's more than with the empty scene's: a translucent ghost
leaks, a neutral grey or the empty scene does not. Pixels the pipeline pasted a
substitute or a perturbed crop on (its windows) are left out of that judgment: they are the mechanism's
output, which the audit measures, not the camera's frame. ``offline`` adds a second offline detector's boxes
(scripts/camera_results.py passes the bundle's learned detector run on overlapping tiles at a low score,
``TiledPeople``), so people the pipeline's own detectors miss are looked for at a higher resolution than the
pipeline runs. A person who stands through the whole clip is in the median too: their pixels do not differ
from the empty scene, so such a box is counted as found but cannot be judged (``measured_boxes`` says how
many could).
"""
import numpy as np

# the offline detectors the meter looks with (re-exported: callers read them from here too)
from sensorveil.benchmarks.reference_people import (  # noqa: F401
    MEDIAN_EVERY,
    PERSON_DIFF,
    TiledPeople,
    empty_scene,
    merge_boxes,
    offline_boxes,
    to_grey,
)

MIN_PERSON_PIXELS = 20    # a box with fewer person pixels says nothing either way
MIN_CORRELATION = 0.3     # below it the released pixels show no pattern of the person's
CONTEXT = 0.25            # share of a box's size judged around it: a flat person shows as a silhouette


def correlation(a, b) -> float:
    """Pearson's correlation of two pixel sets; 0 where either is flat (a flat patch shows nobody)."""
    a, b = a - a.mean(), b - b.mean()
    scale = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / scale) if scale > 1e-6 else 0.0


def box_leaks(raw_grey, released_grey, empty, box, pasted=None) -> "bool | None":
    """True: the released pixels of the box correlate with the raw frame's more than with the empty scene's
    (the person's pattern, a silhouette included, is still there) and by at least MIN_CORRELATION; None: the
    box has too few person pixels (raw differs from the empty scene) to judge. ``pasted``: a boolean mask of
    the frame's pixels the pipeline pasted its output on, left out of the judgment."""
    x, y, w, h = (int(v) for v in box)
    grow_x, grow_y = max(int(CONTEXT * w), 2), max(int(CONTEXT * h), 2)     # the silhouette's edge is a pattern too
    rows = slice(max(y - grow_y, 0), y + h + grow_y)
    cols = slice(max(x - grow_x, 0), x + w + grow_x)
    r, x_raw, e = (a[rows, cols] for a in (released_grey, raw_grey, empty))
    judged = np.ones(r.shape, bool) if pasted is None else ~pasted[rows, cols]
    if (judged & (np.abs(x_raw - e) > PERSON_DIFF)).sum() < MIN_PERSON_PIXELS:
        return None
    with_raw, with_empty = correlation(r[judged], x_raw[judged]), correlation(r[judged], e[judged])
    return bool(with_raw > with_empty and with_raw >= MIN_CORRELATION)


def pasted_mask(shape, windows):
    """The pixels inside the pipeline's crop windows (x0, y0, x1, y1), clipped to the frame."""
    mask = np.zeros(shape[:2], bool)
    for x0, y0, x1, y1 in np.asarray(windows, dtype=np.int64).reshape(-1, 4):
        mask[max(y0, 0):max(y1, 0), max(x0, 0):max(x1, 0)] = True
    return mask


class LeakMeter(object):
    """``add(index, raw, released, pipeline_boxes, pipeline_windows)`` per frame, then ``figures()``."""

    def __init__(self, empty, offline=None):
        """``empty``: the grey empty scene; ``offline(index, raw)``: more boxes of people (a made scene's truth,
        or ``TiledPeople`` on the raw frame)."""
        self.empty, self.offline = empty, offline
        self.boxes = self.unprivatized = self.leaking = self.measured = 0
        self.worst = {"frame": None, "leaking": 0, "boxes": []}

    def people(self, index, raw):
        """Every person the offline detectors find in the raw frame (``offline(index, raw)`` adds its boxes)."""
        found = offline_boxes(raw, self.empty)
        return found if self.offline is None else merge_boxes(found, self.offline(index, raw))

    def add(self, index, raw, released, pipeline_boxes, pipeline_windows=None):
        from sensorveil.runtime.camera import iou
        found = self.people(index, raw)
        self.boxes += len(found)
        if len(found) and len(pipeline_boxes):
            found = found[iou(found, pipeline_boxes).max(1) < 0.3]
        self.unprivatized += len(found)
        raw_grey, released_grey = to_grey(raw), to_grey(released)
        pasted = None if pipeline_windows is None else pasted_mask(raw.shape, pipeline_windows)
        verdicts = [(box, box_leaks(raw_grey, released_grey, self.empty, box, pasted)) for box in found]
        leaking = [box.tolist() for box, leak in verdicts if leak]
        self.measured += sum(leak is not None for _, leak in verdicts)
        self.leaking += len(leaking)
        if len(leaking) > self.worst["leaking"]:
            self.worst = {"frame": int(index), "leaking": len(leaking), "boxes": leaking}

    def figures(self) -> dict:
        return {"offline_boxes": self.boxes, "not_privatized_boxes": self.unprivatized,
                "measured_boxes": self.measured, "leaking_boxes": self.leaking,
                "leaking_share": self.leaking / self.boxes if self.boxes else 0.0, "worst_frame": self.worst,
                "offline_detectors": "difference from the empty scene" + (
                    "" if self.offline is None else " + " + getattr(self.offline, "label", "more boxes"))}
