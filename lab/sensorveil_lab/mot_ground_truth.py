"""A MOTChallenge gt.txt (frame, id, left, top, width, height, ...; frames from 1) read for a clip of the same
frames at another size: walkway.avi is MOT15's PETS09-S2L1 scaled from 768x576 to 480x360."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def ground_truth(path: Path, size: tuple, clip_size: tuple) -> dict:
    """frame (0-based) -> (ids, centre x, centre y, width) of the gt.txt's people, scaled to the clip's pixels."""
    table = np.loadtxt(path, delimiter=",", ndmin=2)
    sx, sy = clip_size[0] / size[0], clip_size[1] / size[1]
    people = {}
    for frame in np.unique(table[:, 0]).astype(int):
        rows = table[table[:, 0] == frame]
        people[frame - 1] = (rows[:, 1].astype(np.int64), (rows[:, 2] + rows[:, 4] / 2) * sx,
                             (rows[:, 3] + rows[:, 5] / 2) * sy, rows[:, 4] * sx)
    return people


def people_in_frame(people: dict, clip_size: tuple, frames: int) -> dict:
    """frame (0-based, every one of ``frames``) -> how many ground-truth people stand in it: those whose box centre
    lies inside the frame (an annotator's box runs on past the edge for a person walking out of view)."""
    width, height = clip_size
    counts = {}
    for frame in range(int(frames)):
        _, cx, cy, _ = people.get(frame, (None, np.zeros(0), np.zeros(0), None))
        counts[frame] = int(((cx >= 0) & (cx < width) & (cy >= 0) & (cy < height)).sum())
    return counts


def frame_count(clip: Path) -> int:
    """How many frames the clip decodes to, grabbed without keeping them (a header's count can be off)."""
    import cv2
    capture, frames = cv2.VideoCapture(str(clip)), 0
    while capture.grab():
        frames += 1
    capture.release()
    return frames


def clip_size_of(clip: Path) -> tuple:
    """(width, height) of a clip's frames."""
    import cv2
    capture = cv2.VideoCapture(str(clip))
    size = (int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    capture.release()
    return size
