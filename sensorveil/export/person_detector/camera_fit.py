"""The person detector's threshold and tiles for one camera, chosen at export on the run's own clip.

COCO's SSDLite at the bundles' first setting (DEFAULT_SCORE on the frame's square tiles) finds most of walkway's
people but fewer than half of them on two fetched cameras, whose people are smaller and many of them stand
(docs/detector_fit.md, its first-setting rows; decision 0024). A lower threshold and smaller tiles find them;
both cost something (boxes where nobody is, graph runs a frame), and how much each camera needs differs. So the
export measures it.

Each candidate, tile rows (learned.detector_tiles) x threshold (SCORES, DEFAULT_SCORE down to SCORE_RANGE's
floor), united with the motion detector as the pipeline unites them, is run on sampled frames of the clip's
TRAINING part (CALIBRATION_PART, where the crops, the bank screen
and the int8 calibration come from; the clip's later frames are left to the audits) and scored against the
reference people the clip audit scores recall against (reference_people: difference from the empty scene, plus
the graph on overlapping tiles at a low score). The export keeps:

- the cheapest candidate (fewest graph runs a frame, then the highest threshold) that covers RECALL_TARGET of
  the reference people with at most EXTRA_BOXES boxes where the reference has nobody, per reference person;
- where none does, the one that covers the most people (protection first: a box where nobody is costs a
  substitute where nobody is, never a person shown), and the record says the target was not reached.

What the fit cannot see: a person neither the difference from the empty scene nor the low-threshold graph finds
is in no reference, so the recall it reaches is an upper bound on a camera's real one (the walkway page checks
against annotated people). The record (``fit_record``) goes into the manifest's camera entry as
``detector_fit``, which the runtime does not read: the choice is its two fields, each checked in range there.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from sensorveil.export.person_detector.common import CALIBRATION_PART
from sensorveil.runtime.camera.learned import (
    DEFAULT_SCORE,
    DEFAULT_TALLEST,
    DEFAULT_TILE_ROWS,
    DETECTOR_INPUT,
    MOTION_SCALE,
    SCORE_RANGE,
    TALLEST_RANGE,
    TILE_ROWS_RANGE,
    capped,
    detector_tiles,
    merge_tiles,
    on_small_tile,
    people_boxes,
    square_tiles,
    unite,
)

RECALL_TARGET = 0.90      # of the training part's reference people; the audit's goal is 0.85 on the whole clip
EXTRA_BOXES = 0.25        # boxes matching no reference person, per reference person
SCORES = (DEFAULT_SCORE, 0.25, 0.2, 0.15, 0.1, 0.07, SCORE_RANGE[0])
TILE_ROWS = tuple(range(TILE_ROWS_RANGE[0], TILE_ROWS_RANGE[1] + 1))
MATCH_IOU = 0.3           # a box is a reference person's at this IoU (detector_recall.FOUND_IOU)
WARM_UP = 30              # the frames the clip audit skips before it judges
JUDGE_EVERY = 10          # a judged frame every this many of the training part (the audit's recall stride)
MAX_FRAMES = 400          # frames of the training part read at most: longer clips are read at a stride
PROGRESS_SECONDS = 20.0
# camera.detector_tallest: TALLEST_MARGIN times the TALLEST_PERCENTILE-th percentile of the reference people's
# heights on the training part (a robust tallest person: the references hold a few boxes over groups too)
TALLEST_MARGIN = 1.5
TALLEST_PERCENTILE = 95

_FITTED: dict = {}        # fits made in this process, by (clip bytes, size, mtime, detector): formats share one


class Candidate:
    """One setting's figures on the judged frames: people covered of the reference's, and boxes on no one."""

    def __init__(self, rows: int, score: float):
        self.rows, self.score = rows, score
        self.covered = self.people = self.extra = self.runs = 0

    @property
    def recall(self) -> float:
        return self.covered / self.people if self.people else 0.0

    @property
    def extra_per_person(self) -> float:
        return self.extra / self.people if self.people else 0.0

    def meets_target(self) -> bool:
        return self.people > 0 and self.recall >= RECALL_TARGET and self.extra_per_person <= EXTRA_BOXES

    def as_dict(self) -> dict:
        return {"tile_rows": self.rows, "score": self.score, "recall": round(self.recall, 4),
                "extra_boxes_per_person": round(self.extra_per_person, 4), "graph_runs_per_frame": self.runs}


def fit_camera(clip, detector: Path, progress=print) -> dict:
    """The manifest's camera fields for ``clip`` (``detector_score``, ``detector_tile_rows`` and the
    ``detector_fit`` record) with the ONNX person detector at ``detector``. A clip that is not here, or whose
    training part shows nobody to the references, keeps the first setting, and the record says why."""
    if not clip or not Path(clip).is_file():
        progress(f"the person detector keeps its first setting (threshold {DEFAULT_SCORE}, tile rows "
                 f"{DEFAULT_TILE_ROWS}): the run's clip {clip!r} is not here to fit it to")
        return first_setting(f"the run's clip {clip!r} was not here at export")
    stat = Path(clip).stat()
    key = (str(Path(clip).resolve()), stat.st_size, stat.st_mtime_ns, str(detector))
    if key not in _FITTED:
        _FITTED[key] = _fit(clip, detector, progress)
    return {**_FITTED[key], "detector_fit": dict(_FITTED[key]["detector_fit"])}


def first_setting(why: str) -> dict:
    return {"detector_score": DEFAULT_SCORE, "detector_tile_rows": DEFAULT_TILE_ROWS,
            "detector_tallest": DEFAULT_TALLEST, "detector_fit": {"chosen": "first setting", "why": why}}


def _fit(clip, detector: Path, progress) -> dict:
    from sensorveil.benchmarks.clip_audit import OncePerFrame
    from sensorveil.benchmarks.reference_people import TiledPeople, empty_scene, merge_boxes, offline_boxes
    from sensorveil.sdk.datasets.bank_screen import graph_runner
    frames, stride = training_frames(clip)
    run = graph_runner(detector)
    reference = OncePerFrame(TiledPeople(run))     # the empty scene's frames and the judged ones overlap
    progress(f"fitting the person detector to {Path(clip).name}: the empty scene of {len(frames)} training frames")
    empty = empty_scene(frames, reference)
    candidates = [Candidate(rows, score) for rows in TILE_ROWS for score in SCORES]
    judged = range(-(-WARM_UP // stride), len(frames), max(JUDGE_EVERY // stride, 1))
    people = {index: merge_boxes(offline_boxes(frames[index], empty), reference(index, frames[index]))
              for index in judged}
    tallest = tallest_share(list(people.values()), frames[0].shape[0])
    moving = motion_boxes(frames, set(judged))
    started = said = time.monotonic()
    for count, index in enumerate(judged, 1):
        score_frame(frames[index], people[index], candidates, run, moving[index], tallest * frames[0].shape[0])
        if time.monotonic() - said >= PROGRESS_SECONDS:
            said = time.monotonic()
            progress(f"fitting the person detector: {count} of {len(judged)} frames, {said - started:.0f} s")
    chosen, reached = choose(candidates)
    return fit_record(clip, chosen, reached, candidates, len(judged), tallest, progress)


def tallest_share(people: list, height: int) -> float:
    """camera.detector_tallest from the reference people (boxes per judged frame) of frames ``height`` tall:
    TALLEST_MARGIN times their TALLEST_PERCENTILE-th height, as a share of the frame, in TALLEST_RANGE."""
    heights = np.concatenate([np.asarray(boxes, np.int64).reshape(-1, 4)[:, 3] for boxes in people] or [[]])
    if not len(heights):
        return DEFAULT_TALLEST
    share = TALLEST_MARGIN * float(np.percentile(heights, TALLEST_PERCENTILE)) / height
    return round(float(np.clip(share, *TALLEST_RANGE)), 3)


def training_frames(clip) -> tuple:
    """(frames, stride): the clip's training part (its first CALIBRATION_PART), every ``stride``-th frame so
    that at most MAX_FRAMES are held."""
    import cv2
    capture = cv2.VideoCapture(str(clip))
    until = max(int((int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) or MAX_FRAMES) * CALIBRATION_PART), 1)
    stride = -(-until // MAX_FRAMES)
    frames = []
    for index in range(until):
        ok, frame = capture.read()
        if not ok:
            break
        if index % stride == 0:
            frames.append(frame)
    capture.release()
    return frames, stride


def motion_boxes(frames: list, wanted: set) -> dict:
    """index -> the motion detector's boxes on each ``wanted`` frame, its background model fed every frame before,
    as the pipeline's motion beside the graph (at the recall speed's scale)."""
    from sensorveil.runtime.camera import MotionPeopleDetector
    motion = MotionPeopleDetector(scale=MOTION_SCALE)
    found = {}
    for index, frame in enumerate(frames):
        boxes = motion.detect(frame)
        if index in wanted:
            found[index] = boxes
    return found


def score_frame(frame, people, candidates: list, run, moving, tallest: float) -> None:
    """Every candidate's boxes, united with the motion detector's ``moving`` as the pipeline unites them
    (learned.unite), on ``frame`` against its reference ``people``; the graph runs once a tile, and each threshold
    reads the same rows."""
    from sensorveil.benchmarks.clip_audit import covered_people
    from sensorveil.runtime.camera import iou
    rows_of = {rows: graph_rows(frame, rows, run) for rows in TILE_ROWS}
    for candidate in candidates:
        tiles = rows_of[candidate.rows]
        boxes = unite(merged_boxes(tiles, candidate.score, tallest), moving)
        on_someone = (iou(boxes, people) >= MATCH_IOU).any(1) if len(boxes) and len(people) else \
            np.zeros(len(boxes), bool)
        candidate.covered += covered_people(people, boxes)
        candidate.people += len(people)
        candidate.extra += int((~on_someone).sum())
        candidate.runs = len(tiles)


def graph_rows(frame, rows: int, run) -> list:
    """[(offset (x, y, 0, 0), tile shape, whether it is a smaller tile, the graph's rows)] for each of ``frame``'s
    tiles, resized and made RGB as LearnedPeopleDetector.find_in does."""
    import cv2
    found = []
    squares = len(square_tiles(frame.shape[0], frame.shape[1]))
    for number, (top, left, side) in enumerate(detector_tiles(frame.shape[0], frame.shape[1], rows)):
        tile = frame[top:top + side, left:left + side]
        shrunk = cv2.resize(np.ascontiguousarray(tile[..., :3]), DETECTOR_INPUT[::-1], interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(shrunk, cv2.COLOR_BGR2RGB)
        found.append((np.array([left, top, 0, 0]), tile.shape, number >= squares, np.asarray(run(None, image[None]))))
    return found


def merged_boxes(tiles: list, score: float, tallest: float) -> np.ndarray:
    """The people of ``graph_rows``' tiles at ``score``, one box each, none taller than ``tallest`` pixels below
    DEFAULT_SCORE, kept and merged as LearnedPeopleDetector.find keeps and merges them."""
    found = []
    for offset, shape, small, rows in tiles:
        boxes = people_boxes(rows, shape, score)
        if score < DEFAULT_SCORE:
            boxes = capped(boxes, tallest, lambda: people_boxes(rows, shape, DEFAULT_SCORE))
        found.append((on_small_tile(boxes, shape[0]) if small else boxes) + offset)
    return merge_tiles(np.concatenate(found))


def choose(candidates: list) -> tuple:
    """(chosen candidate, whether it meets the target): the cheapest, then highest-threshold candidate that does;
    else the one covering the most people (the cheaper, then the one with fewer boxes on no one, where equal)."""
    meeting = [c for c in candidates if c.meets_target()]
    if meeting:
        return min(meeting, key=lambda c: (c.runs, -c.score)), True
    return max(candidates, key=lambda c: (c.covered, -c.runs, -c.extra)), False


def fit_record(clip, chosen: Candidate, reached: bool, candidates: list, judged: int, tallest: float,
               progress) -> dict:
    people = chosen.people
    if not people:
        progress(f"the person detector keeps its first setting: the references find nobody on {Path(clip).name}'s "
                 f"{judged} judged training frames")
        return first_setting(f"the references found nobody on {judged} judged frames of the training part")
    line = (f"the person detector fitted to {Path(clip).name}: threshold {chosen.score}, tile rows {chosen.rows} "
            f"({chosen.runs} graph runs a frame): {chosen.recall:.1%} of {people} reference people on "
            f"{judged} training frames, {chosen.extra_per_person:.2f} boxes on no one per person; boxes below "
            f"{DEFAULT_SCORE} at most {tallest:.0%} of the frame tall")
    progress(line if reached else line + f"; WARNING: no setting reaches {RECALL_TARGET:.0%} with at most "
             f"{EXTRA_BOXES} boxes on no one per person, so the one finding the most people is kept: the camera "
             "audit (sensorveil camera-audit) says what this camera's release shows")
    return {"detector_score": chosen.score, "detector_tile_rows": chosen.rows, "detector_tallest": tallest,
            "detector_fit": {"chosen": "fitted", "target_reached": reached, "recall_target": RECALL_TARGET,
                             "extra_boxes_limit": EXTRA_BOXES, "judged_frames": judged, "reference_people": people,
                             "reference": "difference from the training part's empty scene + the graph on "
                                          "overlapping tiles at a low score (the clip audit's recall reference)",
                             "frames": f"the first {CALIBRATION_PART:.0%} of {Path(clip).name}",
                             "candidates": [c.as_dict() for c in candidates]}}
