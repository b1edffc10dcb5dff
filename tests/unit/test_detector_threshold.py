"""The threshold a quantized person detector ships with (sensorveil.export.person_detector.threshold), on made rows:
the highest one at which it finds fp32's people, and a refusal where finding them takes a flood of boxes."""
from __future__ import annotations

import numpy as np
import pytest

from sensorveil.export.person_detector import DetectorUnavailable
from sensorveil.export.person_detector.threshold import matched_threshold

SHAPE = (300, 300)


def rows(scores, extra=()):
    """(1, N, 6) detections: one person box per score in a row of its own, then ``extra`` (score, box) rows."""
    found = [[0.05 + 0.09 * i, 0.1, 0.13 + 0.09 * i, 0.2, score, 1] for i, score in enumerate(scores)]
    found += [[y, x, y + 0.1, x + 0.05, score, 1] for score, (y, x) in extra]
    return np.asarray([found], dtype=np.float32)


def test_the_threshold_is_the_highest_that_finds_fp32s_people():
    """fp32 finds ten people at 0.5; the quantized graph scores them 0.27: its threshold comes out 0.27, not
    fp32's 0.3 (where it would find no one) and not lower than it needs."""
    wanted = [rows([0.5] * 10)]
    assert matched_threshold(wanted, [rows([0.5] * 10)], SHAPE, "same") == pytest.approx(0.3)
    assert matched_threshold(wanted, [rows([0.27] * 10)], SHAPE, "lower") == pytest.approx(0.27)
    # one person of ten (90%) found at 0.3 is not enough: the 99% rule lowers it to where the tenth is found
    assert matched_threshold(wanted, [rows([0.5] * 9 + [0.225])], SHAPE, "one low") == pytest.approx(0.22)


def test_a_graph_that_finds_the_people_only_among_many_boxes_is_refused():
    """The people scored 0.1, and below 0.2 twenty boxes where fp32 sees no one: no threshold keeps the boxes
    within 1.5x fp32's, so the graph is refused, naming what was checked and the thresholds tried."""
    wanted = [rows([0.5] * 10)]
    flood = [(0.15, (0.05 + 0.04 * i, 0.5 + 0.02 * (i % 2))) for i in range(20)]
    with pytest.raises(DetectorUnavailable, match="the test graph finds other people than the fp32 graph"):
        matched_threshold(wanted, [rows([0.1] * 10, flood)], SHAPE, "the test graph")


def test_people_found_elsewhere_do_not_count():
    """Boxes in other places (IoU below 0.5 with fp32's) cover no one: refused, not matched."""
    wanted = [rows([0.5] * 3)]
    elsewhere = np.asarray([[[0.6, 0.6, 0.7, 0.65, 0.9, 1]] * 1], dtype=np.float32)
    with pytest.raises(DetectorUnavailable, match="none|no threshold"):
        matched_threshold(wanted, [elsewhere], SHAPE, "misplaced")
