"""The downstream people counters a privatized video is checked with (what a people counter downstream of the
camera would see): fresh counters, and the figures of two per-frame count series."""
from __future__ import annotations

import math

import numpy as np

# the downstream people counters the count is checked with: the pipeline's own detector and tracker, the
# same detector without the tracker (its background model learns people who stop), and another model
COUNTERS = {
    "pipeline": "the pipeline's own (MOG2 + tracker: people who walked in stay found when they stop)",
    "mog2": "plain MOG2 (no tracker: people who stop fade into its scene)",
    "knn": "KNN, OpenCV's other background model",
}


COUNTER_NAMES = {"pipeline": "the pipeline's own counter", "mog2": "plain MOG2", "knn": "KNN"}


def count_figures(counted_raw, counted_private) -> dict:
    """Same-count share and privatized-minus-raw mean (95% interval) of two per-frame count series."""
    counted_raw, counted_private = np.asarray(counted_raw), np.asarray(counted_private)
    diff = counted_private - counted_raw
    return {
        "same_share": float((diff == 0).mean()),
        "mean_abs_diff": float(np.abs(diff).mean()),
        "mean_diff": float(diff.mean()),
        "mean_diff_ci95": 1.96 * float(diff.std(ddof=1)) / math.sqrt(len(diff)),
        "raw_mean": float(counted_raw.mean()),
        "private_mean": float(counted_private.mean()),
        "raw_people": int(counted_raw.sum()),
        "private_people": int(counted_private.sum()),
    }


def counter(name: str):
    """A fresh counter of ``COUNTERS``: a frame in, the boxes (x, y, w, h) of the people it finds out."""
    from sensorveil.runtime.camera import MotionPeopleDetector, PersonCrops

    if name == "pipeline":
        people = PersonCrops()
        return lambda frame: people.prepare(frame)[1][1]
    return MotionPeopleDetector(background=name).detect


def counters() -> dict:
    """Two fresh copies of each counter: one for the raw video, one for the video compared with it."""
    return {name: (counter(name), counter(name)) for name in COUNTERS}

