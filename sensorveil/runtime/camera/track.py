"""Following the detected people from frame to frame, and the way each one walks.

The tracker is greedy IoU matching with a centroid fallback, enough for people walking apart.
"""
import numpy as np


def iou(a, b):
    """IoU of boxes (x, y, w, h): a (N, 4) against b (M, 4) -> (N, M)."""
    a, b = np.asarray(a, dtype=np.float64).reshape(-1, 4), np.asarray(b, dtype=np.float64).reshape(-1, 4)
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 0] + a[:, None, 2], b[None, :, 0] + b[None, :, 2])
    y2 = np.minimum(a[:, None, 1] + a[:, None, 3], b[None, :, 1] + b[None, :, 3])
    inter = np.maximum(x2 - x1, 0) * np.maximum(y2 - y1, 0)
    union = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-9), 0.0)


class Tracker(object):
    """Greedy IoU tracker with a centroid fallback: each box of a frame continues the track whose last
    box overlaps it most (IoU >= ``min_iou``), else the nearest track centre within ``max_jump`` box
    heights; unmatched boxes start new tracks; a track unseen for ``max_missed`` frames ends.
    ``update(boxes)`` -> track id per box (ints from 0, in order of first appearance)."""

    def __init__(self, min_iou=0.2, max_jump=0.75, max_missed=5):
        self.min_iou, self.max_jump, self.max_missed = float(min_iou), float(max_jump), int(max_missed)
        self.tracks = {}     # id -> [last box, frames since seen]
        self.next_id = 0

    def update(self, boxes):
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        ids = [-1] * len(boxes)
        live = sorted(self.tracks)
        if live and len(boxes):
            last = np.array([self.tracks[t][0] for t in live])
            overlap = iou(boxes, last)
            centre = lambda b: b[:, :2] + b[:, 2:] / 2.0  # noqa: E731
            dist = np.linalg.norm(centre(boxes)[:, None] - centre(last)[None], axis=2)
            scale = np.maximum(boxes[:, None, 3], last[None, :, 3])
            # score: IoU where it is enough, else a centroid match scored below any IoU match
            score = np.where(overlap >= self.min_iou, 1.0 + overlap,
                             np.where(dist <= self.max_jump * scale, 1.0 - dist / (self.max_jump * scale + 1e-9),
                                      -1.0))
            while True:
                i, j = np.unravel_index(np.argmax(score), score.shape)
                if score[i, j] < 0:
                    break
                ids[i] = live[j]
                score[i, :] = -1.0
                score[:, j] = -1.0
        for i, box in enumerate(boxes):
            if ids[i] < 0:
                ids[i] = self.next_id
                self.next_id += 1
            self.tracks[ids[i]] = [box, 0]
        for t in list(self.tracks):
            if t not in ids:
                self.tracks[t][1] += 1
                if self.tracks[t][1] > self.max_missed:
                    del self.tracks[t]
        return np.asarray(ids, dtype=np.int64)


class WalkingDirection(object):
    """Each tracked person's walking direction from the boxes of its last ``window`` frames: the slope
    of the box centre's x over frames, 1 (right, x growing) or 0 (left), -1 while the person is too new
    or slower than ``min_speed`` px/frame. The labels of the camera dataset (sdk.datasets.load_walkway)
    use the same rule over a window centred on the frame; here only past frames exist."""

    def __init__(self, window=10, min_speed=0.3):
        self.window, self.min_speed = int(window), float(min_speed)
        self.history = {}       # track id -> list of (frame number, centre x)
        self.frame = 0

    def update(self, ids, boxes):
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        labels = np.full(len(ids), -1, dtype=np.int64)
        for k, (track, box) in enumerate(zip(ids, boxes)):
            points = self.history.setdefault(int(track), [])
            points.append((self.frame, box[0] + box[2] / 2.0))
            del points[:-self.window]
            if len(points) >= 3:
                speed = slope(np.asarray(points))
                if abs(abs(speed) - self.min_speed) < 1e-6:
                    # a tie with the threshold (x are half pixels, so exact ties happen): polyfit's rounding
                    # decides it, as it always has, so a label never changes with the solver
                    speed = np.polyfit(*np.asarray(points).T, 1)[0]
                if abs(speed) >= self.min_speed:
                    labels[k] = int(speed > 0)
        for track in [t for t, points in self.history.items() if self.frame - points[-1][0] > self.window]:
            del self.history[track]      # gone for longer than the window: forget it
        self.frame += 1
        return labels


def slope(points):
    """The least-squares slope of (t, x) rows: np.polyfit(t, x, 1)[0] without its general solver, which
    costs more than the rest of the tracker on a frame of a few people."""
    centred = points - points.mean(axis=0)
    return float(centred[:, 0] @ centred[:, 1] / (centred[:, 0] @ centred[:, 0]))
