"""walkway: people in a real camera clip, found and followed on the clip itself."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from sensorveil.runtime.bundle import sha256_of
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


def _looks(x: np.ndarray, track: np.ndarray, tracks: np.ndarray, crop: tuple) -> np.ndarray:
    """Each track's mean look: its crops averaged, 16x8 px, the centre half of the width against the outer
    quarters (the person more than the background), one row per track of ``tracks``."""
    h, w = crop
    small = x.reshape(len(x), 16, h // 16, 8, w // 8).mean((2, 4))             # (N, 16, 8)
    contrast = small[:, :, 2:6] - np.median(np.concatenate([small[:, :, :2], small[:, :, 6:]], 2), 2)[:, :, None]
    return np.stack([contrast[track == t].mean(0).ravel() for t in tracks]) / 64.0


def _walkway_appearance(x: np.ndarray, track: np.ndarray, kept_tracks: np.ndarray, crop: tuple, clusters: int,
                        seed: int) -> tuple:
    """Each crop's appearance class (k-means clusters of the tracks' mean look) and the clusters' centres."""
    looks = _looks(x, track, kept_tracks, crop)
    track_cluster = _kmeans(looks, int(clusters), seed)
    # an empty cluster's centre is nowhere, so no bank person is put in it
    centres = np.stack([looks[track_cluster == j].mean(0) if (track_cluster == j).any()
                        else np.full(looks.shape[1], np.inf) for j in range(int(clusters))])
    return track_cluster[np.searchsorted(kept_tracks, track)], centres


# Datasets whose test rows are a later stretch of time than their training rows (walkway: the clip's
# last 40%). Their private classes come in other shares there, so the audit scores their attackers on
# the test rows reweighted to the training part's shares (sdk.audit.label_shift_weights).
SPLIT_BY_TIME = frozenset({"walkway"})


BANK_SOURCES = ("rendered", "consented", "clip")
RENDERED_WALKERS, RENDERED_PHASES = 48, 12     # 1,152 bank crops; 12 phases of a cycle at 2 frames a step: ~1 s
SCREEN_CANDIDATES = 64     # walkers drawn for the bank screen, of which those the detector finds are kept


def load_walkway(path: str | None = None, clusters: int = 4, train_fraction: float = 0.6, stride: int = 2,
                 min_track: int = 10, min_speed: float = 0.3, seed: int = 0, bank: str = "rendered",
                 bank_clip: str | None = None, bank_screen: str | None = None,
                 bank_screened: dict | None = None) -> SensorDataset:
    """People crops from a still camera clip (``path``: e.g. ``shared/media/walkway.avi``), labelled from
    the clip itself. The camera pipeline's own detector and tracker (sensorveil.runtime.camera) find
    and follow everyone; every ``stride``-th frame gives one 128x64 grey crop per person.

    Attributes: ``appearance`` (private, ``clusters`` classes): who it is, as k-means clusters of the
    tracks' mean look (their crops averaged, 16x8 px, centre half of the width, so the person more
    than the background); ``direction`` (useful): walking left or right, from the sign of the track's
    horizontal speed around that frame (crops slower than ``min_speed`` px/frame, and tracks shorter
    than ``min_track`` crops, are left out); ``track`` (the track id); ``trial_split``: the time split,
    0 for the first ``train_fraction`` of the clip's frames, 1 for the rest (PASS and PR-GAN train on
    0 and are scored on 1), 2 for the substitute bank's people, who are in neither split.

    ``bank`` says who the substitutes a release shows are (recorded in ``camera["bank"]``, and so in the
    bundle): "rendered" (the default) appends walkers the SDK draws itself (sdk.datasets.rendered_people),
    no person of any camera; "consented" appends the people of ``bank_clip``, footage of people who agreed
    to be shown, recorded with the file's sha256; "clip" appends none, so PASS draws its bank from this
    clip's own training rows: real bystanders of the deployment camera, shown elsewhere in its release.

    ``bank_screen``: a person detector's ONNX file; a rendered bank then keeps the walkers it finds pasted into
    this clip's training part (sdk.datasets.bank_screen): every substitute a person on this camera's scene.
    ``bank_screened``: such a screen's outcome (the bank provenance's "screen", with its ``kept_walkers``), the same
    walkers kept without pasting again: what a run records in place of ``bank_screen``, so export and the audits
    reload the very bank it trained on (``recorded_options``)."""
    _check_options(path, train_fraction, bank, bank_clip, bank_screen, bank_screened)
    from sensorveil.runtime.camera import CROP_MARGIN, CROP_SHAPE
    clip = _moving_people(path, stride, min_track, min_speed)
    kept_tracks, (h, w) = np.unique(clip["track"]), CROP_SHAPE
    appearance, centres = _walkway_appearance(clip["x"], clip["track"], kept_tracks, CROP_SHAPE, clusters, seed)
    direction = (clip["speed"] > 0).astype(np.int64)
    cut = int(round(train_fraction * clip["n_frames"]))        # the first frame of the test part
    split = (clip["frame"] >= cut).astype(np.int64)
    people = {"x": clip["x"], "foreground": clip["foreground"], "colour": clip["colour"], "track": clip["track"],
              "appearance": appearance, "direction": direction, "split": split,
              "timeline": np.stack([clip["frame"].astype(np.float64), clip["cx"]], axis=1)}
    people, provenance = _with_bank(people, path, bank, bank_clip, centres, (stride, min_track, min_speed, seed),
                                    bank_screened if bank_screen is None else (bank_screen, cut))
    x, track, split, direction, appearance = (people[k] for k in ("x", "track", "split", "direction", "appearance"))
    track_ids, track_index = np.unique(track, return_inverse=True)
    prior = _appearance_prior(direction, appearance, split == 0, clusters)
    names = _class_names(clusters, track_ids, train_fraction, None if bank == "clip" else provenance)
    return SensorDataset(
        name="walkway", x=np.ascontiguousarray(x),
        attributes={"appearance": appearance, "direction": direction, "track": track_index.astype(np.int64),
                    "trial_split": split},
        num_classes={k: len(v) for k, v in names.items()}, modality="image", sensor_range=(0.0, 255.0),
        units="grey level 0-255 (8-bit camera, BT.601 luma)", synthetic=False,
        description=(f"people crops {h}x{w} from {Path(path).name} (motion detector + IoU tracker, every "
                     f"{stride} frames; {len(kept_tracks)} tracks in {clusters} appearance clusters); "
                     f"substitute bank: {provenance['people']}"),
        class_names=names, prior_fn=prior, foreground=np.ascontiguousarray(people["foreground"]),
        colour=None if people["colour"] is None else np.ascontiguousarray(people["colour"]),
        timeline=people["timeline"],
        recorded_options=None if "screen" not in provenance else {"bank_screen": None,
                                                                   "bank_screened": provenance["screen"]},
        camera={"frame": "person-crops", "detector": "motion", "crop_shape": [h, w], "margin": CROP_MARGIN,
                "crop_every": int(stride), "bank": provenance})


def _appearance_prior(direction: np.ndarray, appearance: np.ndarray, train: np.ndarray, clusters: int):
    """prior_fn(useful, private): what the public may know, how often each appearance class walks each way,
    from the training part of the clip only (the test part is the future)."""
    counts = np.zeros((2, int(clusters)))
    np.add.at(counts, (direction[train], appearance[train]), 1.0)

    def prior(useful: str, private: str) -> np.ndarray | None:
        if (useful, private) == ("direction", "appearance"):
            return counts / np.maximum(counts.sum(1, keepdims=True), 1.0)
        return None
    return prior


def _class_names(clusters: int, track_ids: np.ndarray, train_fraction: float, bank: dict | None) -> dict:
    split_names = [f"train (first {train_fraction:.0%} of the clip)", "test (the rest)"]
    if bank is not None:       # the bank's people: rows of split 2
        split_names.append(f"substitute bank ({bank['people']})")
    return {"appearance": [f"look {k}" for k in range(int(clusters))], "direction": list(WALKWAY_DIRECTIONS),
            "track": [f"track {t}" for t in track_ids], "trial_split": split_names}


def _with_bank(people: dict, path, bank: str, bank_clip, centres: np.ndarray, settings: tuple,
               screen: tuple | None = None) -> tuple:
    """The clip's rows with the bank's people appended as rows of split 2 (none for a "clip" bank, whose
    substitutes PASS draws from the clip's training rows), and the bank's provenance. ``screen``: (detector
    file, first frame of the test part) to screen a rendered bank, or a recorded screen's outcome (a dict)."""
    if bank == "clip":
        return people, {"source": "clip", "real_people": True, "bystanders": True,
                         "people": f"this camera's own people ({Path(path).name}, training part)"}
    from sensorveil.runtime.camera import CROP_SHAPE
    rounds = screen["candidates"] // SCREEN_CANDIDATES if isinstance(screen, dict) else 1
    extra, provenance = _bank_people(bank, bank_clip, *settings, screen=screen is not None, rounds=rounds)
    if isinstance(screen, dict):
        extra, provenance = _kept_walkers(extra, provenance, screen)
    elif screen is not None:
        extra, provenance = _screened(extra, provenance, path, *screen, seed=settings[-1])
    extra["appearance"] = _nearest_look(extra, centres, CROP_SHAPE)
    extra["track"] = extra["track"] + int(people["track"].max()) + 1
    extra["split"] = np.full(len(extra["x"]), 2, np.int64)
    extra["timeline"] = np.tile([-1.0, np.nan], (len(extra["x"]), 1))    # filmed by no camera of this clip
    return {k: _joined(people[k], extra.get(k)) for k in people}, provenance


def _screened(rows: dict, provenance: dict, path, graph: str, until: int, seed: int) -> tuple:
    """The rendered bank's rows of the walkers the screen keeps, and its provenance with the screen's. The screen
    draws further rounds of candidates (_rendered_rows' batches) where few of the first read as people."""
    from sensorveil.sdk.datasets.bank_screen import screen_walkers
    drawn = [rows]

    def more(batch: int) -> tuple:
        drawn.append(_rendered_rows(SCREEN_CANDIDATES, seed, True, batch))
        return drawn[-1]["cut_out"], _walker_of(drawn[-1]) - SCREEN_CANDIDATES * batch     # ids within the round

    kept, screen = screen_walkers(path, until, rows["cut_out"], _walker_of(rows), graph, seed,
                                  progress=_screen_progress, more=more)
    while len(drawn) < screen.get("rounds", 1):     # a screen this process ran before drew them, not this call
        drawn.append(_rendered_rows(SCREEN_CANDIDATES, seed, True, len(drawn)))
    rows = {k: np.concatenate([d[k] for d in drawn]) for k in rows}
    return _kept_walkers(rows, provenance, {**screen, "kept_walkers": [int(w) for w in kept]})


def _walker_of(rows: dict) -> np.ndarray:
    return rows["track"] // 2          # a walker's two sequences: facing right, then left


def _kept_walkers(rows: dict, provenance: dict, screen: dict) -> tuple:
    """The rendered bank's rows of the walkers a screen kept (``screen["kept_walkers"]``), and its provenance
    with the screen's."""
    keep = np.isin(_walker_of(rows), screen["kept_walkers"])
    rows = {k: v[keep] for k, v in rows.items() if k != "cut_out"}
    people = (f"{screen['kept']} walkers the SDK draws itself (of {screen['candidates']}, those a person detector "
              "finds pasted into this camera's training part), no real person")
    return rows, {**provenance, "walkers": screen["kept"], "screen": screen, "people": people}


def _screen_progress(done: int, total: int) -> None:
    if done == total or done % 10 == 0:
        print(f"bank screen: {done} of {total} frames of places pasted and searched", flush=True)


def _check_options(path, train_fraction: float, bank: str, bank_clip, bank_screen=None, bank_screened=None) -> None:
    if path is None:
        raise ValueError("walkway needs path=: a still camera clip of people walking, e.g. ../shared/media/walkway.avi")
    if not Path(path).is_file():
        raise FileNotFoundError(f"walkway clip not found: {path}")
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    if bank not in BANK_SOURCES:
        raise ValueError(f"bank {bank!r}; expected one of {list(BANK_SOURCES)} (rendered: walkers the SDK draws, "
                         "consented: bank_clip=PATH of people who agreed, clip: this camera's own bystanders)")
    if bank_screen is not None and (bank != "rendered" or not Path(bank_screen).is_file()):
        raise ValueError(f"bank_screen names the person detector's ONNX file that screens a rendered bank; got "
                         f"bank={bank!r}, bank_screen={bank_screen!r}")
    if bank_screened is not None:
        _check_screened(bank, bank_screen, bank_screened)
        _check_screened_clip(path, bank_screened)
    if (bank == "consented") != (bank_clip is not None):
        raise ValueError("bank_clip names the consented footage and goes with bank=consented only; got "
                         f"bank={bank!r}, bank_clip={bank_clip!r}")


def _check_screened(bank: str, bank_screen, screened) -> None:
    """A recorded screen goes with a rendered bank, alone, and names at least MIN_KEPT distinct walkers of the
    SCREEN_CANDIDATES drawn, as many as its ``kept`` says."""
    from sensorveil.sdk.datasets.bank_screen import MIN_KEPT, SCREEN_ROUNDS
    if bank != "rendered" or bank_screen is not None:
        raise ValueError(f"bank_screened is a rendered bank's recorded screen, in place of bank_screen; got "
                         f"bank={bank!r}, bank_screen={bank_screen!r}")
    kept = screened.get("kept_walkers") if isinstance(screened, dict) else None
    good = isinstance(kept, list) and all(isinstance(w, int) and not isinstance(w, bool) for w in kept)
    drawn = [SCREEN_CANDIDATES * r for r in range(1, SCREEN_ROUNDS + 1)]
    candidates = screened.get("candidates") if isinstance(screened, dict) else None
    if not good or len(set(kept)) != len(kept) or len(kept) < MIN_KEPT or screened.get("kept") != len(kept) \
            or candidates not in drawn or not all(0 <= w < candidates for w in kept):
        raise ValueError(f"bank_screened.kept_walkers {kept!r} of {candidates!r} 'candidates'; expected at least "
                         f"{MIN_KEPT} distinct walker ids below the candidates, as many as its 'kept', of one of "
                         f"{drawn} candidates (rounds of {SCREEN_CANDIDATES})")


def _check_screened_clip(path, screened: dict) -> None:
    """A recorded screen is this clip's: its walkers were kept for this camera's scene, not another's."""
    if screened.get("clip_sha256") != sha256_of(Path(path)):
        raise ValueError(f"bank_screened.clip_sha256 {screened.get('clip_sha256')!r}; expected the sha256 of "
                         f"{Path(path).name}, the clip the screen ran on")


def _moving_people(path: str, stride: int, min_track: int, min_speed: float) -> dict:
    """The clip's crops of people walking: tracks of at least ``min_track`` crops, crops at least
    ``min_speed`` px/frame, with each crop's horizontal speed."""
    from sensorveil.runtime.camera import CROP_SHAPE
    people = _walkway_people(str(Path(path).resolve()), CROP_SHAPE, int(stride))
    frame, track = people["frame"], people["track"]
    speed = _walkway_velocity(frame, track, people["cx"], window=5 * stride)
    lengths = np.bincount(track)
    keep = (lengths[track] >= min_track) & (np.abs(speed) >= min_speed)
    return {"x": people["x"][keep], "foreground": people["foreground"][keep], "frame": frame[keep],
            "colour": None if people["colour"] is None else people["colour"][keep], "track": track[keep],
            "speed": speed[keep], "cx": people["cx"][keep], "n_frames": people["n_frames"]}


def _bank_people(bank: str, bank_clip: str | None, stride: int, min_track: int, min_speed: float,
                 seed: int, screen: bool = False, rounds: int = 1) -> tuple:
    """The substitute bank's people as dataset rows (x, foreground, colour, track, direction) and their
    provenance: who they are, recorded in the bundle. ``rounds``: a screened bank's rounds of candidates."""
    if bank == "rendered":
        from sensorveil.sdk.datasets.rendered_people import GENERATOR
        walkers = SCREEN_CANDIDATES if screen else RENDERED_WALKERS
        drawn = [_rendered_rows(walkers, seed, screen, batch) for batch in range(rounds)]
        rows = {k: np.concatenate([d[k] for d in drawn]) for k in drawn[0]}
        return rows, {"source": "rendered", "real_people": False, "bystanders": False, "generator": GENERATOR,
                      "walkers": walkers, "phases": RENDERED_PHASES, "seed": int(seed),
                      "people": f"{walkers} walkers the SDK draws itself, no real person"}
    if not Path(bank_clip).is_file():
        raise FileNotFoundError(f"bank_clip not found: {bank_clip}; expected footage of people who agreed to be shown")
    people = _moving_people(bank_clip, stride, min_track, min_speed)
    rows = {"x": people["x"], "foreground": people["foreground"], "colour": people["colour"],
            "track": people["track"], "direction": (people["speed"] > 0).astype(np.int64)}
    return rows, {"source": "consented", "real_people": True, "bystanders": False,
                  "clip": Path(bank_clip).name, "sha256": sha256_of(Path(bank_clip)),
                  "people": f"consented people of {Path(bank_clip).name}"}


def _rendered_rows(walkers: int, seed: int, screen: bool, batch: int = 0) -> dict:
    """Rows of ``walkers`` rendered walkers (render_walkers' ``batch``), their tracks numbered after the batches
    before them; a screen's rows keep the cut-outs, which the screen pastes as the runtime does."""
    from sensorveil.runtime.camera import CROP_SHAPE
    from sensorveil.sdk.datasets.rendered_people import render_walkers
    drawn = render_walkers(walkers, RENDERED_PHASES, CROP_SHAPE, seed=seed, batch=batch)
    rows = {"x": drawn["x"], "foreground": drawn["foreground"], "colour": drawn["colour_on_ground"],
            "track": drawn["sequence"] + 2 * walkers * batch, "direction": drawn["direction"]}
    if screen:
        rows["cut_out"] = drawn["colour"]
    return rows


def _nearest_look(rows: dict, centres: np.ndarray, crop: tuple) -> np.ndarray:
    """Each bank row's appearance class: the clip's cluster whose centre is nearest its track's mean look."""
    tracks = np.unique(rows["track"])
    looks = _looks(rows["x"], rows["track"], tracks, crop)
    nearest = ((looks[:, None] - centres[None]) ** 2).sum(-1).argmin(1)
    return nearest[np.searchsorted(tracks, rows["track"])].astype(np.int64)


def _joined(first, second):
    """Two row arrays one after the other; None where the clip has none (a grey camera's colour)."""
    if first is None:
        return None
    if second is None:
        raise ValueError("the bank has no colour crops for a colour camera")
    return np.concatenate([first, second.astype(first.dtype)])
