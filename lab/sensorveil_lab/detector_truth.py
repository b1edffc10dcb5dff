"""The person detector's fit checked against annotated people: each setting the export tries
(sensorveil.export.person_detector.camera_fit, with motion beside it as the fit scores it), and the fit's own
reference people, scored on a clip's TEST part
(the frames the fit never saw) against a MOTChallenge gt.txt. The fit's reference misses people no detector of
it found, so its recall is an upper bound; the ground truth says how far off it is."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sensorveil.benchmarks.ground_truth import clip_size_of

JUDGE_EVERY = 10


def truth_boxes(path: Path, size: tuple, clip_size: tuple) -> dict:
    """frame (0-based) -> (N, 4) int boxes (x, y, w, h) of the gt.txt's people in the clip's pixels, those whose
    box centre lies inside the frame (an annotator's box runs on past the edge for a person walking out)."""
    table = np.loadtxt(path, delimiter=",", ndmin=2)
    sx, sy = clip_size[0] / size[0], clip_size[1] / size[1]
    boxes = {}
    for frame in np.unique(table[:, 0]).astype(int):
        rows = table[table[:, 0] == frame][:, 2:6] * np.array([sx, sy, sx, sy])
        centre_x, centre_y = rows[:, 0] + rows[:, 2] / 2, rows[:, 1] + rows[:, 3] / 2
        inside = (centre_x >= 0) & (centre_x < clip_size[0]) & (centre_y >= 0) & (centre_y < clip_size[1])
        boxes[frame - 1] = np.round(rows[inside]).astype(np.int64)
    return boxes


def truth_recall(clip: Path, gt: Path, gt_size: tuple, candidates: list, detector: Path, tallest: float,
                 log=print) -> dict:
    """{"frames", "people", "reference": share of the annotated people the fit's reference covers, "candidates":
    [{tile_rows, score, recall}]} on every JUDGE_EVERY-th frame of the clip's test part, boxes below the first
    threshold capped at ``tallest`` of the frame's height as the fit caps them."""
    from sensorveil.benchmarks.clip_audit import OncePerFrame, covered_people, read_clip
    from sensorveil.benchmarks.reference_people import TiledPeople, empty_scene, merge_boxes, offline_boxes
    from sensorveil.export.person_detector.camera_fit import graph_rows, merged_boxes, motion_boxes
    from sensorveil.export.person_detector.common import CALIBRATION_PART
    from sensorveil.runtime.camera.learned import unite
    from sensorveil.sdk.datasets.bank_screen import graph_runner
    frames = read_clip(clip)
    truth = truth_boxes(gt, gt_size, clip_size_of(clip))
    run = graph_runner(detector)
    reference = OncePerFrame(TiledPeople(run))
    log(f"detector truth: the empty scene of {len(frames)} frames")
    empty = empty_scene(frames, reference)
    settings = sorted({(c["tile_rows"], c["score"]) for c in candidates})
    found = {setting: 0 for setting in settings}
    referenced = people = judged = 0
    test_part = range(int(len(frames) * CALIBRATION_PART), len(frames), JUDGE_EVERY)
    moving = motion_boxes(frames, set(test_part))
    for index in test_part:
        annotated = truth.get(index, np.zeros((0, 4), np.int64))
        people, judged = people + len(annotated), judged + 1
        ref = merge_boxes(offline_boxes(frames[index], empty), reference(index, frames[index]))
        referenced += covered_people(annotated, ref)
        rows_of = {rows: graph_rows(frames[index], rows, run) for rows, _ in settings}
        for rows, score in settings:
            boxes = merged_boxes(rows_of[rows], score, tallest * frames[0].shape[0])
            found[(rows, score)] += covered_people(annotated, unite(boxes, moving[index]))
    share = lambda hits: hits / people if people else 0.0  # noqa: E731
    return {"frames": judged, "people": people, "reference": share(referenced),
            "candidates": [{"tile_rows": rows, "score": score, "recall": share(found[(rows, score)])}
                           for rows, score in settings]}

