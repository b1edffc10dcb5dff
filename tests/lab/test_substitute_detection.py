"""Pasted substitutes are people to an independent detector: rendered walkers (the default bank) pasted into
walkway.avi where its people were, as the runtime pastes a cut-out, and the bundles' COCO SSDLite graph run on
the pasted frames (scripts/substitute_detection.py; the figures: docs/substitute_detection.md). Runs in CI's
detector step (it needs the detector extra, as tests/integration/test_person_detector.py does)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import WALKWAY, load_script
from tests.integration.test_person_detector import converter_or_skip

SAMPLE_EVERY = 20        # every 20th frame of the clip: about 180 places, a minute of CPU
GOAL = 0.9               # the share of pasted substitutes a detector must find


@pytest.fixture(scope="module")
def found():
    """Per kind (walkers, real), per place pasted as released: whether the graph found the pasted person."""
    converter_or_skip()
    script = load_script("substitute_detection")
    find = script.graph_finder()
    places = script.clip_places(WALKWAY, every=SAMPLE_EVERY, start=40, find=find)   # where a learned bundle pastes
    records = script.measure(find, places, script.walker_bank(48, 12, 0), seed=0)["released"]
    return {kind: np.asarray(record["found"], bool) for kind, record in records.items()}


def test_pasted_walkers_are_found_nearly_as_often_as_the_clips_own_people(found):
    """A regression floor under the renderer, against the clip's real people cut out of their own crops and
    pasted at the same places the same way: the detector's reach at this clip's small sizes bounds both."""
    walkers, real = found["walkers"], found["real"]
    assert len(walkers) >= 100 and real.mean() >= 0.6, (len(walkers), real.mean())
    assert walkers.mean() >= 0.85 * real.mean(), (walkers.mean(), real.mean())
    assert walkers[real].mean() >= 0.7, walkers[real].mean()     # where the real person was found


@pytest.mark.xfail(strict=True, reason="rendered walkers are not yet found by the detector as often as the goal "
                                       "asks (docs/substitute_detection.md); strict: passing fails, to raise the bar")
def test_nine_in_ten_pasted_walkers_are_found_as_people(found):
    assert found["walkers"].mean() >= GOAL, found["walkers"].mean()


def test_the_bank_screen_keeps_walkers_found_as_people_on_frames_it_never_saw():
    """The walkers the bank screen keeps (screened on the clip's training part, sdk.datasets.bank_screen) pasted
    at places after those frames: nine in ten are found, where the unscreened bank's are not."""
    converter_or_skip()
    script = load_script("substitute_detection")
    find = script.graph_finder()
    screened, record = script.screened_bank(WALKWAY, 12, 0)
    assert record["kept"] < record["candidates"] and len(screened) == record["kept"] * 24
    places = script.clip_places(WALKWAY, every=10, start=record["frames_until"], find=find)
    records = script.measure(find, places, script.walker_bank(48, 12, 0), seed=0, screened=screened)["released"]
    found = np.asarray(records["walkers, screened"]["found"], bool)
    assert len(found) >= 100 and found.mean() >= GOAL, (len(found), found.mean())
