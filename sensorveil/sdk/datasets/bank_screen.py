"""Rendered walkers screened on the deployment camera's own scene: a substitute must be a person to a detector.

Some rendered walkers read as people far less often than others once pasted into a camera's scene (their
clothing against its ground, their build at its sizes: scripts/substitute_detection.py measures it). The screen
pastes every candidate walker, one random phase and facing at a time, at the places a learned bundle pastes (the
person detector's boxes on sampled frames of the clip's TRAINING part) on the motion detector's empty scene, as
the runtime pastes, runs the detector on the pasted frame, and keeps the walkers it finds at least SCREEN_SHARE
of the time. The clip's test part is left for the audits, so a page can measure the screened bank on frames the
screen never saw (scripts/substitute_detection.py --screen-graph).

The detector is named by its ONNX file (the bundles' person detector, sensorveil.export.person_detector), so the
trainer needs no exporter: the graph's sha256 goes into the bank's provenance.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

SCREEN_SHARE = 0.85       # a walker is kept when the detector finds it at this share of the places
SCREEN_EVERY = 10         # every 10th frame of the training part is a frame of places
SCREEN_START = 40         # the motion model's warm-up: its empty scene is not yet a scene before this
MIN_KEPT = 16             # fewer walkers than this pass: the screen refuses rather than ship a tiny bank
# Where few walkers read as people (people close to the camera, drawn large), the screen draws another round of
# as many candidates, up to this many rounds, rather than refuse or keep walkers at a laxer share
SCREEN_ROUNDS = 3
MATCH_IOU = 0.5
HEIGHT_RATIO = 1.5


def graph_runner(graph: str | Path):
    """run_graph(graph, batch) of the ONNX person detector at ``graph`` (onnxruntime), as a bundle's pipeline
    runs it."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    return lambda _graph, batch: session.run(None, {"image": batch.astype(np.float32)})[0]


def graph_finder(graph: str | Path):
    """find(frame) -> person boxes of the ONNX person detector at ``graph``, at the bundles' threshold."""
    from sensorveil.runtime.camera import learned
    return learned.LearnedPeopleDetector(graph_runner(graph), score=learned.DEFAULT_SCORE).find


def training_places(clip: str | Path, until: int, find, every: int = SCREEN_EVERY,
                    start: int = SCREEN_START) -> list:
    """[(frame, empty scene, boxes)] of every ``every``-th frame from ``start`` up to frame ``until`` where
    ``find`` sees people; the scene is the motion detector's, run over every frame as the camera's is."""
    from sensorveil.runtime.camera import MotionPeopleDetector, opencv
    cv2 = opencv()
    capture, motion, places, index = cv2.VideoCapture(str(clip)), MotionPeopleDetector(), [], 0
    try:
        while index < until:
            ok, frame = capture.read()
            if not ok:
                break
            motion.detect(frame)
            if index >= start and index % every == 0:
                boxes = np.asarray(find(frame), np.int64).reshape(-1, 4)
                if len(boxes):
                    places.append((frame, np.asarray(motion.background()).copy(), boxes))
            index += 1
    finally:
        capture.release()
    return places


def paste(frame, background, cut_outs, boxes):
    """``frame`` with each box's window cleared to the scene and its cut-out scaled to the box, as the runtime
    pastes on a picture of the place (composite.paste_people at scene.CAMERA_CONTRAST)."""
    from sensorveil.runtime.camera import CROP_SHAPE, crop_windows
    from sensorveil.runtime.camera.composite import paste_people
    from sensorveil.runtime.camera.scene import CAMERA_CONTRAST
    windows = crop_windows(boxes, frame.shape, CROP_SHAPE)
    contrast = np.full(frame.shape[:2], CAMERA_CONTRAST, np.int16)
    return paste_people(frame, cut_outs, windows, background=background, boxes=boxes, contrast=contrast)


def matched(pasted, detections):
    """Per pasted box, whether a detection is that person: IoU >= MATCH_IOU, or one box mostly inside the other
    (learned.COVERED of its area) with heights within a factor HEIGHT_RATIO (not a head, not a whole group);
    greedily, best IoU first, each detection for one pasted box at most."""
    from sensorveil.runtime.camera import iou
    from sensorveil.runtime.camera.learned import inside_pairs
    pasted = np.asarray(pasted, np.int64).reshape(-1, 4)
    detections = np.asarray(detections, np.int64).reshape(-1, 4)
    found = np.zeros(len(pasted), bool)
    if not len(pasted) or not len(detections):
        return found
    overlap = iou(pasted, detections)
    ratio = detections[None, :, 3] / np.maximum(pasted[:, None, 3], 1)
    inside = inside_pairs(pasted, detections) | inside_pairs(detections, pasted).T
    good = (overlap >= MATCH_IOU) | (inside & (ratio >= 1 / HEIGHT_RATIO) & (ratio <= HEIGHT_RATIO))
    used = np.zeros(len(detections), bool)
    for k in np.argsort(-overlap.max(1), kind="stable"):
        free = np.flatnonzero(good[k] & ~used)
        if len(free):
            used[free[np.argmax(overlap[k, free])]] = True
            found[k] = True
    return found


def found_shares(places: list, colour: np.ndarray, walker_of: np.ndarray, find, seed: int = 0,
                 progress=None, draw_round: int = 0) -> np.ndarray:
    """Per walker (``walker_of``: each bank crop's walker, 0..W-1), the share of ``places`` where ``find``
    finds it pasted: at each place every walker is pasted at all of its boxes, one crop of it drawn per box.
    ``draw_round``: the screen's round (its own draws of crops; round 0 draws as the screen always has)."""
    rng = np.random.default_rng([seed, 85] if not draw_round else [seed, 85, draw_round])
    walkers = int(walker_of.max()) + 1
    rows = [np.flatnonzero(walker_of == w) for w in range(walkers)]
    found, pasted = np.zeros(walkers), np.zeros(walkers)
    for k, (frame, background, boxes) in enumerate(places):
        for w in range(walkers):
            crops = colour[rng.choice(rows[w], size=len(boxes))]
            hits = matched(boxes, find(paste(frame, background, crops, boxes)))
            found[w] += hits.sum()
            pasted[w] += len(hits)
        if progress is not None:
            progress(k + 1, len(places))
    return found / np.maximum(pasted, 1)


def screen_walkers(clip: str | Path, until: int, colour: np.ndarray, walker_of: np.ndarray, graph: str | Path,
                   seed: int = 0, progress=None, more=None) -> tuple:
    """(kept walkers' ids, provenance) of the screen on the clip's frames before ``until``. ``more``: more(r) ->
    (colour, walker_of) of round r's candidates (as many walkers as the first's), drawn while fewer than MIN_KEPT
    are kept, up to SCREEN_ROUNDS rounds; round r's walker w is kept as r x (walkers a round) + w. A screen of
    the same clip, detector, walkers and seed ran before in this process is reused: an audit reloads the dataset
    the run trained on (a minute of pasting on walkway), and the same inputs screen to the same walkers."""
    key = _screen_key(clip, until, colour, walker_of, graph, seed) + (more is not None,)
    if key not in _SCREENED:
        _SCREENED[key] = _screen(clip, until, (colour, walker_of), graph, seed, progress, key[:2], more)
    kept, provenance = _SCREENED[key]
    return kept.copy(), dict(provenance)


_SCREENED: dict = {}      # screen_walkers' results in this process, by _screen_key


def _screen_key(clip, until: int, colour: np.ndarray, walker_of: np.ndarray, graph, seed: int) -> tuple:
    """What a screen's result depends on: the clip's and the detector's bytes, the walkers' crops, the seed."""
    import hashlib

    from sensorveil.runtime.bundle import sha256_of
    crops = hashlib.sha256(np.ascontiguousarray(colour).tobytes())
    crops.update(np.ascontiguousarray(walker_of, dtype=np.int64).tobytes())
    return (sha256_of(Path(clip)), sha256_of(Path(graph)), int(until), int(seed), crops.hexdigest(),
            SCREEN_SHARE, SCREEN_EVERY, MIN_KEPT, SCREEN_ROUNDS)


def _screen(clip, until: int, first: tuple, graph, seed: int, progress, hashes: tuple, more=None) -> tuple:
    """The screen itself, in rounds (screen_walkers); ``first``: round 0's (colour, walker_of); ``hashes``: the
    clip's and the detector's sha256 (_screen_key has read both)."""
    find = graph_finder(graph)
    places = training_places(clip, until, find)
    if not places:
        raise ValueError(f"bank screen: the detector {Path(graph).name} finds no person on the training part of "
                         f"{Path(clip).name}; expected a still camera clip of people walking")
    per_round, kept, rounds, (colour, walker_of) = int(first[1].max()) + 1, [], 0, first
    while True:
        shares = found_shares(places, colour, walker_of, find, seed, _counted_on(progress, rounds),
                              draw_round=rounds)
        kept.extend(rounds * per_round + np.flatnonzero(shares >= SCREEN_SHARE))
        rounds += 1
        if len(kept) >= MIN_KEPT or more is None or rounds == SCREEN_ROUNDS:
            break
        colour, walker_of = more(rounds)
    if len(kept) < MIN_KEPT:
        raise ValueError(_too_few(clip, len(kept), rounds * per_round, places))
    return np.asarray(kept, np.int64), {
        "detector": Path(graph).name, "detector_sha256": hashes[1], "share": SCREEN_SHARE,
        "candidates": int(rounds * per_round), "rounds": int(rounds), "kept": int(len(kept)),
        "places": int(sum(len(p[2]) for p in places)), "frames_until": int(until), "clip_sha256": hashes[0]}


def _counted_on(progress, rounds_before: int):
    """``progress`` counting a round's places after the rounds before it (all rounds paste at the same places)."""
    if progress is None:
        return None
    return lambda done, total: progress(rounds_before * total + done, (rounds_before + 1) * total)


def _too_few(clip, kept: int, candidates: int, places: list) -> str:
    boxes = sum(len(place[2]) for place in places)
    return (f"bank screen: {kept} of {candidates} rendered walkers are found as people at >= {SCREEN_SHARE:.0%} of "
            f"{Path(clip).name}'s training places; expected at least {MIN_KEPT}: the detector sees few pasted "
            f"people on this scene (and finds {boxes / len(places):.1f} people a frame on it: check how many the "
            "frames hold). Without the screen: the motion detector alone (quickstart --person-detector motion), "
            "or a consented bank")
