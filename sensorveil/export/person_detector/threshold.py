"""The person-score threshold a quantized person detector ships with: one that finds the people fp32 finds.

int8 rounding lowers the scores of people near the threshold, so at fp32's own threshold (DEFAULT_SCORE) an
int8 graph finds fewer people, in a crowd most of all (the figures: docs/decisions/0009-camera-speed-levers.md,
"int8 detector" and "The Coral's int8 TFLite file too"). The
export lowers the quantized graph's threshold in SCORE_STEP steps to the highest one at which its boxes on
the calibration frames cover PEOPLE_COVERED of the fp32 graph's people (IoU MATCH_IOU) with at most MAX_BOXES
times their number; the bundle's graph entry carries it as ``score`` (learned.GRAPH_SCORE_KEY), which the
runtime accepts only in SCORE_RANGE and never above camera.detector_score (learned.check_graph_entry). No such
threshold is a DetectorUnavailable: the graph is not shipped. Every quantized form uses this one rule: the
int8 ONNX graph (CPU boards) and the int8 TFLite file (the Coral's, the Edge TPU compiles the same file).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sensorveil.export.person_detector.common import INPUT, DetectorUnavailable
from sensorveil.runtime.camera.learned import DEFAULT_SCORE, SCORE_RANGE, people_boxes
from sensorveil.runtime.camera.track import iou

# the quantized graph's boxes at its threshold cover at least PEOPLE_COVERED of the fp32 graph's people at
# DEFAULT_SCORE, each by IoU MATCH_IOU or more, with no more than MAX_BOXES times fp32's boxes (a threshold
# low enough to find the people only among many more boxes would fill the release with substitutes for no one)
PEOPLE_COVERED = 0.99
MATCH_IOU = 0.5
MAX_BOXES = 1.5
SCORE_STEP = 0.01


def matched_threshold(wanted_rows: list, rows: list, shape: tuple, what: str,
                      camera_score: float = DEFAULT_SCORE) -> float:
    """The highest threshold, from ``camera_score`` (camera.detector_score, fitted to the camera) down in
    SCORE_STEP steps, at which ``rows`` (the quantized graph's (1, N, 6) rows per frame) cover PEOPLE_COVERED of
    the people in ``wanted_rows`` (fp32's, at ``camera_score``) with at most MAX_BOXES times their number;
    DetectorUnavailable naming ``what`` where none does."""
    people = [people_boxes(found, shape, camera_score) for found in wanted_rows]
    total = sum(len(boxes) for boxes in people)
    tried = []
    for score in np.round(np.arange(camera_score, SCORE_RANGE[0] - 1e-9, -SCORE_STEP), 2):
        covered, found = coverage(people, rows, shape, float(score))
        tried.append((float(score), covered, found))
        if found > MAX_BOXES * max(total, 1):
            break
        if covered >= PEOPLE_COVERED * total:
            return float(score)
    raise DetectorUnavailable(
        f"{what} finds other people than the fp32 graph on the calibration frames: no threshold from "
        f"{camera_score} down finds {PEOPLE_COVERED:.0%} of fp32's {total} people with at most {MAX_BOXES}x "
        f"their boxes; (threshold, people covered, boxes) tried: {tried}")


def coverage(people: list, rows: list, shape: tuple, score: float) -> tuple:
    """(how many of ``people`` (boxes per frame) a box of ``rows`` at ``score`` covers by IoU MATCH_IOU or more,
    how many boxes ``rows`` has at ``score``), over all frames."""
    boxes = [people_boxes(found, shape, score) for found in rows]
    covered = sum(int((iou(mine, theirs).max(axis=1) >= MATCH_IOU).sum()) if len(theirs) and len(mine) else 0
                  for mine, theirs in zip(people, boxes))
    return covered, sum(len(theirs) for theirs in boxes)


def detections(path: Path, frames) -> list:
    """An ONNX detector graph's (1, N, 6) rows on each 300x300 RGB frame."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [session.run(None, {INPUT: frame[None].astype(np.float32)})[0] for frame in frames]
