"""A camera clip as the lab's measurements read it: its frames, its empty scene, and for a made scene
(scripts/crowd_clip.py) the recorded truth of who is where."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.leak_meter import empty_scene


def clip_frames(clip: Path) -> list:
    import cv2

    capture, frames = cv2.VideoCapture(str(clip)), []
    ok, frame = capture.read()
    while ok:
        frames.append(frame)
        ok, frame = capture.read()
    capture.release()
    return frames


def clip_empty_scene(clip: Path):
    """The leak meter's empty scene: the median of the clip's frames (sensorveil.benchmarks.leak_meter)."""
    return empty_scene(clip_frames(clip))


def scene_truth(clip: Path) -> tuple:
    """(per-frame person boxes, grey empty scene) of a made scene (scripts/crowd_clip.py writes CLIP.json and
    CLIP.empty.png beside it); (None, None) for a camera's own clip."""
    import cv2

    from sensorveil.benchmarks.leak_meter import to_grey
    record, still = Path(str(clip) + ".json"), Path(str(clip) + ".empty.png")
    if not (record.is_file() and still.is_file()):
        return None, None
    return json.loads(record.read_text())["boxes"], to_grey(cv2.imread(str(still)))


def truth_boxes(truth: list, tiles=None):
    """The leak meter's ``offline``: a made scene's recorded boxes of the frame (and the tiled detector's)."""
    from sensorveil.benchmarks.leak_meter import merge_boxes

    def boxes(index, raw):
        known = np.asarray(truth[index] if index < len(truth) else [], np.int64).reshape(-1, 4)
        return known if tiles is None else merge_boxes(known, tiles(index, raw))
    boxes.label = "the made scene's recorded people" + ("" if tiles is None else " + the learned detector on tiles")
    return boxes

