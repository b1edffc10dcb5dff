"""walkway: people in a real camera clip, found and followed on the clip itself."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from sensorveil.sdk.datasets.base import SensorDataset

WALKWAY_DIRECTIONS = ("left", "right")


def _kmeans(features: np.ndarray, k: int, seed: int, iterations: int = 100) -> np.ndarray:
    """Plain k-means (k-means++ start, Lloyd's iterations), numpy only: a label per row."""
    rng = np.random.default_rng(seed)
    centres = [features[rng.integers(len(features))]]
    for _ in range(1, k):
        d2 = np.min(((features[:, None] - np.asarray(centres)[None]) ** 2).sum(-1), axis=1)
        centres.append(features[rng.choice(len(features), p=d2 / d2.sum())])
    centres = np.asarray(centres)
    labels = np.zeros(len(features), dtype=np.int64)
    for _ in range(iterations):
        labels = ((features[:, None] - centres[None]) ** 2).sum(-1).argmin(1)
        moved = np.array([features[labels == j].mean(0) if (labels == j).any() else centres[j] for j in range(k)])
        if np.allclose(moved, centres):
            break
        centres = moved
    # clusters numbered by size, largest first, so labels do not depend on the start
    order = np.argsort(-np.bincount(labels, minlength=k), kind="stable")
    return np.argsort(order)[labels]


@functools.lru_cache(maxsize=4)
def _walkway_people(path: str, crop: tuple, stride: int) -> dict:
    """Detect and track every person of the clip once (sensorveil.runtime.camera), keep a crop every
    ``stride`` frames: crops (N, H, W) uint8, frame index, track id, box centre x per crop."""
    from sensorveil.runtime.camera import MotionPeopleDetector, Tracker, crop_people, crop_windows, opencv
    cv2 = opencv()
    capture = cv2.VideoCapture(path)
    if not capture.isOpened():
        raise ValueError(f"cannot open {path} as a video; expected a camera clip such as walkway.avi")
    detector, tracker = MotionPeopleDetector(), Tracker()
    crops, colours, masks, frames, tracks, centres, index = [], [], [], [], [], [], 0
    try:
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            boxes = detector.detect(frame)
            ids = tracker.update(boxes)
            if len(boxes) and index % stride == 0:
                windows = crop_windows(boxes, frame.shape, crop)
                crops.append(crop_people(frame, windows, crop))
                if frame.ndim == 3:     # a colour camera: its bank people are pasted in colour
                    colours.append(crop_people(frame, windows, crop, colour=True))
                masks.append(crop_people(detector.foreground, windows, crop) > 127)
                frames += [index] * len(boxes)
                tracks += list(ids)
                centres += list(boxes[:, 0] + boxes[:, 2] / 2.0)
            index += 1
    finally:
        capture.release()
    if not crops:
        raise ValueError(f"no people found in {path}; expected a still camera filming people walking by")
    return {"x": np.concatenate(crops), "foreground": np.concatenate(masks), "frame": np.asarray(frames),
            "colour": np.concatenate(colours) if len(colours) == len(crops) else None,
            "track": np.asarray(tracks),
            "cx": np.asarray(centres, dtype=np.float64), "n_frames": index}


def _walkway_velocity(frame: np.ndarray, track: np.ndarray, cx: np.ndarray, window: int) -> np.ndarray:
    """Horizontal speed (px/frame) of each crop's person: the slope of its track's centre x over the
    crop's own frames within +-``window`` frames."""
    speed = np.zeros(len(frame))
    for t in np.unique(track):
        rows = np.flatnonzero(track == t)
        for r in rows:
            near = rows[np.abs(frame[rows] - frame[r]) <= window]
            if len(near) >= 2 and np.ptp(frame[near]) > 0:
                speed[r] = np.polyfit(frame[near], cx[near], 1)[0]
    return speed


def _walkway_appearance(x: np.ndarray, track: np.ndarray, kept_tracks: np.ndarray, crop: tuple, clusters: int,
                        seed: int) -> np.ndarray:
    """Each crop's appearance class: k-means clusters of the tracks' mean look (their crops averaged,
    16x8 px, centre half of the width, so the person more than the background)."""
    h, w = crop
    small = x.reshape(len(x), 16, h // 16, 8, w // 8).mean((2, 4))             # (N, 16, 8)
    # the person against its own background: centre half of the width minus the outer quarters
    contrast = small[:, :, 2:6] - np.median(np.concatenate([small[:, :, :2], small[:, :, 6:]], 2), 2)[:, :, None]
    looks = np.stack([contrast[track == t].mean(0).ravel() for t in kept_tracks]) / 64.0
    track_cluster = _kmeans(looks, int(clusters), seed)
    return track_cluster[np.searchsorted(kept_tracks, track)]


# Datasets whose test rows are a later stretch of time than their training rows (walkway: the clip's
# last 40%). Their private classes come in other shares there, so the audit scores their attackers on
# the test rows reweighted to the training part's shares (sdk.audit.label_shift_weights).
SPLIT_BY_TIME = frozenset({"walkway"})


def load_walkway(path: str | None = None, clusters: int = 4, train_fraction: float = 0.6, stride: int = 2,
                 min_track: int = 10, min_speed: float = 0.3, seed: int = 0) -> SensorDataset:
    """People crops from a still camera clip (``path``: e.g. ``shared/media/walkway.avi``), labelled from
    the clip itself. The camera pipeline's own detector and tracker (sensorveil.runtime.camera) find
    and follow everyone; every ``stride``-th frame gives one 128x64 grey crop per person.

    Attributes: ``appearance`` (private, ``clusters`` classes): who it is, as k-means clusters of the
    tracks' mean look (their crops averaged, 16x8 px, centre half of the width, so the person more
    than the background); ``direction`` (useful): walking left or right, from the sign of the track's
    horizontal speed around that frame (crops slower than ``min_speed`` px/frame, and tracks shorter
    than ``min_track`` crops, are left out); ``track`` (the track id); ``trial_split``: the time split,
    0 for the first ``train_fraction`` of the clip's frames, 1 for the rest (PASS and PR-GAN train on
    0 and are scored on 1). Tracks are clustered over the whole clip, so one appearance class has
    people in both parts: an attacker learns what a class looks like before the test part.
    """
    if path is None:
        raise ValueError("walkway needs path=: a still camera clip of people walking, e.g. ../shared/media/walkway.avi")
    if not Path(path).is_file():
        raise FileNotFoundError(f"walkway clip not found: {path}")
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    from sensorveil.runtime.camera import CROP_MARGIN, CROP_SHAPE
    people = _walkway_people(str(Path(path).resolve()), CROP_SHAPE, int(stride))
    x, frame, track = people["x"], people["frame"], people["track"]
    speed = _walkway_velocity(frame, track, people["cx"], window=5 * stride)
    lengths = np.bincount(track)
    keep = (lengths[track] >= min_track) & (np.abs(speed) >= min_speed)
    x, frame, track, speed = x[keep], frame[keep], track[keep], speed[keep]
    foreground, colour = people["foreground"][keep], people["colour"]
    kept_tracks, (h, w) = np.unique(track), CROP_SHAPE
    appearance = _walkway_appearance(x, track, kept_tracks, CROP_SHAPE, clusters, seed)
    direction = (speed > 0).astype(np.int64)
    split = (frame >= int(round(train_fraction * people["n_frames"]))).astype(np.int64)
    track_ids, track_index = np.unique(track, return_inverse=True)
    train = split == 0
    counts = np.zeros((2, int(clusters)))
    np.add.at(counts, (direction[train], appearance[train]), 1.0)

    def prior(useful: str, private: str) -> np.ndarray | None:
        # What the public may know: how often each appearance class walks each way, from the training
        # part of the clip only (the test part is the future).
        if (useful, private) == ("direction", "appearance"):
            return counts / np.maximum(counts.sum(1, keepdims=True), 1.0)
        return None

    names = {"appearance": [f"look {k}" for k in range(int(clusters))], "direction": list(WALKWAY_DIRECTIONS),
             "track": [f"track {t}" for t in track_ids],
             "trial_split": [f"train (first {train_fraction:.0%} of the clip)", "test (the rest)"]}
    return SensorDataset(
        name="walkway", x=np.ascontiguousarray(x),
        attributes={"appearance": appearance, "direction": direction, "track": track_index.astype(np.int64),
                    "trial_split": split},
        num_classes={k: len(v) for k, v in names.items()}, modality="image", sensor_range=(0.0, 255.0),
        units="grey level 0-255 (8-bit camera, BT.601 luma)", synthetic=False,
        description=(f"people crops {h}x{w} from {Path(path).name} (motion detector + IoU tracker, every "
                     f"{stride} frames; {len(kept_tracks)} tracks in {clusters} appearance clusters)"),
        class_names=names, prior_fn=prior, foreground=np.ascontiguousarray(foreground),
        colour=None if colour is None else np.ascontiguousarray(colour[keep]),
        camera={"frame": "person-crops", "detector": "motion", "crop_shape": [h, w], "margin": CROP_MARGIN,
                "crop_every": int(stride)})
