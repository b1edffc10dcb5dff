"""Datasets for training and evaluating privacy mechanisms (PR-GAN settings).

Every loader returns a :class:`SensorDataset`: raw samples in sensor units plus
integer-coded attributes, so that any pair of attributes can play the roles of
"useful" and "private" information.  Registered names (see :data:`DATASETS`):

* ``digits``          scikit-learn's 8x8 handwritten digits (PR-GAN section 6.1).
* ``ujiindoorloc``    WiFi fingerprints, binarised heard / not heard (section 6.1).
* ``synthetic-depth`` generated overhead Kinect depth patches of people walking
                      under a door (stand-in for OccuTherm, clearly synthetic).
* ``npz``             any ``.npz`` with ``x`` and one integer array per attribute.
* ``adult``           UCI Adult income from a user-given path (TAPPFL's Table 2).
* ``walkway``         people crops from a still camera clip (walkway.avi), labelled from the clip.

numpy and the standard library only; scikit-learn is imported inside the digits
loader so that the rest works without it.
"""
from __future__ import annotations

import functools
import io
import os
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

PriorFn = Callable[[str, str], "np.ndarray | None"]


@dataclass
class SensorDataset:
    """Samples in sensor units with integer-coded attributes (labels 0..K-1)."""

    name: str
    x: np.ndarray
    attributes: dict[str, np.ndarray]
    num_classes: dict[str, int]
    modality: str
    sensor_range: tuple[float, float]
    units: str
    synthetic: bool
    description: str
    class_names: dict[str, list[str]] = field(default_factory=dict)
    # Structural prior of the dataset; it is a property of the attribute
    # definitions, not of the rows, so subsets keep it unchanged.
    prior_fn: PriorFn | None = field(default=None, repr=False, compare=False)
    # Camera datasets whose samples are crops of whole frames: how the device cuts them out (the
    # bundle manifest's "camera" entry, read by sensorveil.runtime.preprocess). None: samples are frames.
    camera: dict | None = field(default=None, compare=False)
    # Camera crops: which pixels of each sample are the person (bool, the sample's shape), from the
    # detector's foreground mask; substitution bundles paste only those (runtime camera "cut-out").
    foreground: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def sample_shape(self) -> tuple:
        return tuple(self.x.shape[1:])

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def subset(self, idx) -> "SensorDataset":
        """New dataset with rows ``idx`` (index array or boolean mask)."""
        idx = np.asarray(idx)
        return replace(
            self,
            x=self.x[idx],
            attributes={k: v[idx] for k, v in self.attributes.items()},
            foreground=None if self.foreground is None else self.foreground[idx],
        )

    def prior(self, useful: str, private: str) -> np.ndarray | None:
        """Public prior ``theta[y, z] = P(private=z | useful=y)``.

        Known from the attribute definitions alone (PR-GAN sections 4.1, 6.1),
        never estimated from the rows.  Unknown entries are ``nan``; ``None``
        when nothing is known about the pair.
        """
        for attr in (useful, private):
            if attr not in self.attributes:
                raise ValueError(
                    f"unknown attribute {attr!r} for dataset {self.name!r}; "
                    f"expected one of {sorted(self.attributes)}"
                )
        return None if self.prior_fn is None else self.prior_fn(useful, private)


# --------------------------------------------------------------------------
# stratified slicing (PR-GAN section 5.3)
# --------------------------------------------------------------------------


def stratified_slices(strata: np.ndarray, n_slices: int = 3, seed: int = 0) -> list[np.ndarray]:
    """Split rows into ``n_slices`` disjoint parts equal in size and class mix.

    Rows of each stratum are shuffled, strata are laid end to end, and position
    ``i`` goes to slice ``i % n_slices``.  Dealing continuously across strata
    keeps every stratum within one row of an even split *and* the slice sizes
    within one row of each other.
    """
    strata = np.asarray(strata).reshape(-1)
    if n_slices < 1:
        raise ValueError(f"n_slices must be >= 1, got {n_slices}")
    rng = np.random.default_rng(seed)
    order = np.concatenate(
        [rng.permutation(np.flatnonzero(strata == s)) for s in np.unique(strata)]
        or [np.zeros(0, dtype=np.int64)]
    )
    slot = np.arange(order.size) % n_slices
    return [np.sort(order[slot == k]) for k in range(n_slices)]


# --------------------------------------------------------------------------
# digits
# --------------------------------------------------------------------------

# Each digits attribute is a function of the digit, which is what makes its
# prior computable from definitions alone (PR-GAN's theta_E / theta_O).
_DIGIT_ATTRIBUTES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "digit": lambda d: d,
    "parity": lambda d: d % 2,
    "lt5": lambda d: (d < 5).astype(np.int64),
}
_DIGIT_NAMES = {
    "digit": [str(d) for d in range(10)],
    "parity": ["even", "odd"],
    "lt5": [">=5", "<5"],
}


def _digits_prior(useful: str, private: str) -> np.ndarray:
    """theta[y, z] = fraction of the digits with useful=y that have private=z,
    digits assumed equally likely."""
    d = np.arange(10)
    u, p = _DIGIT_ATTRIBUTES[useful](d), _DIGIT_ATTRIBUTES[private](d)
    counts = np.zeros((u.max() + 1, p.max() + 1))
    np.add.at(counts, (u, p), 1.0)
    return counts / counts.sum(axis=1, keepdims=True)


def load_digits_dataset() -> SensorDataset:
    from sklearn.datasets import load_digits  # optional dependency, only here

    bunch = load_digits()
    digit = bunch.target.astype(np.int64)
    attributes = {k: f(digit).astype(np.int64) for k, f in _DIGIT_ATTRIBUTES.items()}
    return SensorDataset(
        name="digits",
        x=bunch.images.astype(np.float32),
        attributes=attributes,
        num_classes={k: len(v) for k, v in _DIGIT_NAMES.items()},
        modality="image",
        sensor_range=(0.0, 16.0),
        units="pixel intensity 0-16",
        synthetic=False,
        description="scikit-learn handwritten digits, 8x8 images (UCI optdigits test set)",
        class_names={k: list(v) for k, v in _DIGIT_NAMES.items()},
        prior_fn=_digits_prior,
    )


# --------------------------------------------------------------------------
# UJIIndoorLoc
# --------------------------------------------------------------------------

UJI_CSVS = ("trainingData.csv", "validationData.csv")
UJI_NUM_WAPS = 520
UJI_NOT_HEARD = 100  # RSSI code for "access point not detected"
UJI_FLOORS_PER_BUILDING = (4, 4, 5)
# Fixed building-floor index so labels never depend on which rows were loaded.
UJI_FLOOR_OFFSET = tuple(int(v) for v in np.cumsum((0,) + UJI_FLOORS_PER_BUILDING[:-1]))
UJI_NUM_FLOORS = sum(UJI_FLOORS_PER_BUILDING)  # 13
UJI_REGIONS_PER_FLOOR = 8
_UJI_META = ("LONGITUDE", "LATITUDE", "FLOOR", "BUILDINGID", "SPACEID", "USERID", "PHONEID")


def _read_uji_csvs(path: Path) -> dict[str, bytes]:
    """Raw bytes of both CSVs from a zip (any subfolder) or a folder."""
    expected = f"a .zip or folder containing {' and '.join(UJI_CSVS)}"
    if not path.exists():
        raise FileNotFoundError(f"UJIIndoorLoc path not found: {path} (expected {expected})")
    if path.is_dir():
        files = {n: sorted(path.rglob(n)) for n in UJI_CSVS}
        _require_all(files, path, expected)
        return {n: files[n][0].read_bytes() for n in UJI_CSVS}
    if not zipfile.is_zipfile(path):
        raise ValueError(f"UJIIndoorLoc path {path} is not a zip file; expected {expected}")
    with zipfile.ZipFile(path) as zf:
        members = {n: sorted(m for m in zf.namelist() if m.rsplit("/", 1)[-1] == n) for n in UJI_CSVS}
        _require_all(members, path, expected)
        return {n: zf.read(members[n][0]) for n in UJI_CSVS}


def _require_all(found: dict[str, list], path: Path, expected: str) -> None:
    missing = [n for n, hits in found.items() if not hits]
    if missing:
        raise ValueError(f"UJIIndoorLoc source {path} lacks {missing}; expected {expected}")


def _parse_uji_csv(raw: bytes, label: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    header = raw.split(b"\n", 1)[0].decode().strip().split(",")
    waps = [f"WAP{i:03d}" for i in range(1, UJI_NUM_WAPS + 1)]
    missing = [c for c in waps + list(_UJI_META) if c not in header]
    if missing:
        raise ValueError(f"{label} lacks columns {missing[:5]}{'...' if len(missing) > 5 else ''}; "
                         f"expected WAP001..WAP520 and {list(_UJI_META)}")
    table = np.loadtxt(io.BytesIO(raw), delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    col = {c: i for i, c in enumerate(header)}
    heard = (table[:, [col[w] for w in waps]] != UJI_NOT_HEARD).astype(np.uint8)
    meta = {c: table[:, col[c]] for c in _UJI_META}
    return heard, meta


def _uji_floor_index(building: np.ndarray, floor: np.ndarray) -> np.ndarray:
    b, f = building.astype(np.int64), floor.astype(np.int64)
    valid = (b >= 0) & (b < len(UJI_FLOORS_PER_BUILDING))
    valid &= (f >= 0) & (f < np.asarray(UJI_FLOORS_PER_BUILDING)[np.clip(b, 0, 2)])
    if not valid.all():
        raise ValueError("UJIIndoorLoc rows with unknown (BUILDINGID, FLOOR); expected buildings 0-2 "
                         f"with {UJI_FLOORS_PER_BUILDING} floors")
    return np.asarray(UJI_FLOOR_OFFSET)[b] + f


def _uji_regions(floor: np.ndarray, lon: np.ndarray, lat: np.ndarray, is_train: np.ndarray) -> np.ndarray:
    """Region 0..103 = floor * 8 + r (see :func:`load_ujiindoorloc`).

    Edges come from the training rows only, so a row's region never depends
    on the split or subset that is loaded.
    """
    region = np.zeros(floor.shape, dtype=np.int64)
    for f in range(UJI_NUM_FLOORS):
        rows, train = floor == f, (floor == f) & is_train
        lon_edges = np.quantile(lon[train], [0.25, 0.5, 0.75])
        lon_bin = np.searchsorted(lon_edges, lon, side="right")
        train_bin = lon_bin[train]
        for b in range(4):
            lat_median = np.median(lat[train][train_bin == b])
            in_bin = rows & (lon_bin == b)
            region[in_bin] = f * UJI_REGIONS_PER_FLOOR + 2 * b + (lat[in_bin] > lat_median)
    return region


def _reindex(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    uniq, inv = np.unique(values.astype(np.int64), return_inverse=True)
    return inv.astype(np.int64), [str(v) for v in uniq]


@functools.lru_cache(maxsize=4)
def _load_uji_arrays(path: str) -> dict:
    """Parse both CSVs once per path; loads are then cheap slicing."""
    raws = _read_uji_csvs(Path(path))
    parts = [_parse_uji_csv(raws[n], f"{path}:{n}") for n in UJI_CSVS]
    heard = np.concatenate([p[0] for p in parts])
    meta = {c: np.concatenate([p[1][c] for p in parts]) for c in _UJI_META}
    is_train = np.repeat([True, False], [len(p[0]) for p in parts])
    floor = _uji_floor_index(meta["BUILDINGID"], meta["FLOOR"])
    attrs = {
        "building": meta["BUILDINGID"].astype(np.int64),
        "floor": floor,
        "region": _uji_regions(floor, meta["LONGITUDE"], meta["LATITUDE"], is_train),
    }
    names = {}
    for attr, column in (("space", "SPACEID"), ("user", "USERID"), ("phone", "PHONEID")):
        attrs[attr], names[attr] = _reindex(meta[column])
    for a in attrs.values():
        a.setflags(write=False)  # shared by every load through the cache
    heard.setflags(write=False)
    return {"x": heard, "attributes": attrs, "is_train": is_train, "names": names}


def _uji_prior(useful: str, private: str) -> np.ndarray | None:
    """Structural priors of the building > floor > region hierarchy (PR-GAN 6.1)."""
    floor_building = np.repeat(np.arange(len(UJI_FLOORS_PER_BUILDING)), UJI_FLOORS_PER_BUILDING)
    region_floor = np.repeat(np.arange(UJI_NUM_FLOORS), UJI_REGIONS_PER_FLOOR)
    on_floor = region_floor[None, :] == np.arange(UJI_NUM_FLOORS)[:, None]  # (13, 104)
    in_building_f = floor_building[None, :] == np.arange(3)[:, None]  # (3, 13)
    in_building_r = floor_building[region_floor][None, :] == np.arange(3)[:, None]  # (3, 104)
    if (useful, private) == ("floor", "region"):
        return on_floor / UJI_REGIONS_PER_FLOOR  # regions are equal-count by construction
    if (useful, private) == ("floor", "building"):
        return in_building_f.T.astype(np.float64)
    if (useful, private) == ("building", "floor"):
        return np.where(in_building_f, np.nan, 0.0)  # floor sizes are not public
    if (useful, private) == ("building", "region"):
        return np.where(in_building_r, np.nan, 0.0)
    return None


def _uji_names() -> dict[str, list[str]]:
    floors = [f"B{b}F{f}" for b, n in enumerate(UJI_FLOORS_PER_BUILDING) for f in range(n)]
    return {
        "building": [f"B{b}" for b in range(len(UJI_FLOORS_PER_BUILDING))],
        "floor": floors,
        "region": [f"{fl}R{r}" for fl in floors for r in range(UJI_REGIONS_PER_FLOOR)],
    }


def _stratified_take(strata: np.ndarray, max_rows: int) -> np.ndarray:
    """Deterministic systematic sample: evenly spaced rows of the strata-sorted
    order, so each stratum keeps roughly its share."""
    order = np.argsort(strata, kind="stable")
    pick = np.linspace(0, len(order) - 1, max_rows).round().astype(np.int64)
    return np.sort(order[np.unique(pick)])


def load_ujiindoorloc(path: str | None = None, split: str = "both", max_rows: int | None = None) -> SensorDataset:
    """UJIIndoorLoc WiFi fingerprints as binary "heard / not heard" vectors.

    ``path``: the UJIIndoorLoc zip (CSVs may sit in a subfolder) or a folder
    with ``trainingData.csv`` and ``validationData.csv``.  ``split``: "train",
    "validation" or "both" (concatenated, 19,937 + 1,111 = 21,048 rows).
    ``max_rows``: deterministic subset stratified by region, for fast tests.

    Attributes: ``building`` (3); ``floor``, the 13 building-floors numbered
    building 0 floors 0-3 -> 0-3, building 1 floors 0-3 -> 4-7, building 2
    floors 0-4 -> 8-12; ``region`` = floor * 8 + r (104), where within each
    floor, using the *training* CSV rows of that floor only, LONGITUDE is cut
    at its 25/50/75 % quantiles into 4 bins (bin = number of edges <= value)
    and each bin is cut at its LATITUDE median (r = 2 * bin + (lat > median)),
    giving 8 regions of about equal training counts; validation rows are
    assigned with the same edges.  ``space``, ``user``, ``phone`` re-index
    SPACEID, USERID, PHONEID over both CSVs (validation rows have SPACEID and
    USERID 0, which becomes class 0).
    """
    if path is None:
        raise ValueError("ujiindoorloc needs path=: the UJIIndoorLoc zip or a folder with "
                         f"{UJI_CSVS}")
    splits = {"train": (True,), "validation": (False,), "both": (True, False)}
    if split not in splits:
        raise ValueError(f"unknown split {split!r}; expected one of {list(splits)}")
    data = _load_uji_arrays(str(Path(path).resolve()))
    rows = np.flatnonzero(np.isin(data["is_train"], splits[split]))
    attrs = data["attributes"]
    if max_rows is not None and max_rows < len(rows):
        rows = rows[_stratified_take(attrs["region"][rows], int(max_rows))]
    names = _uji_names() | data["names"]
    return SensorDataset(
        name="ujiindoorloc",
        x=data["x"][rows],
        attributes={k: v[rows] for k, v in attrs.items()},
        num_classes={k: len(v) for k, v in names.items()},
        modality="vector",
        sensor_range=(0.0, 1.0),
        units="access point heard (1) / not heard (0), from RSSI != 100",
        synthetic=False,
        description=f"UJIIndoorLoc WiFi fingerprints ({split}), 520 access points binarised",
        class_names=names,
        prior_fn=_uji_prior,
    )


# --------------------------------------------------------------------------
# synthetic overhead depth (OccuTherm-like door sensor)
# --------------------------------------------------------------------------

# One renderer for the stream source and this dataset: it lives in the torch-free runtime
# (which may not import sdk), and the dataset imports it from there.
from sensorveil.runtime.synthetic_depth import (  # noqa: E402  (re-exported public names)
    DEPTH_RANGE_MM,
    KINECT_FOCAL_PX,
    BodyParams,
    installation,
    make_identities,
    render_depth_frame,
    synthetic_depth_frames,
)


def load_synthetic_depth(n_identities: int = 20, samples_per_class: int = 160, seed: int = 0,
                         size: int = 180) -> SensorDataset:
    """Synthetic ``size`` x ``size`` depth patches centred (with a tracker's jitter) on a person
    walking under one Kinect v2 installation; ``samples_per_class`` frames per (identity,
    facing), each rendered afresh (pose, stride, noise): 6,400 frames for 20 people in about 15 s. The
    size is what the protocol's D_z needs: trained on slice 1 (a third), the depth classifier told the 20
    people apart at 75% from 2,400 frames, 88% from 4,000 and 94% from 6,400 (facing: 100% from 2,400);
    ``python scripts/depth_raw_accuracy.py`` prints today's raw figures on slice 3. The frames allow more:
    trees on each frame's depth histogram reach 99.6% (``--trees``)."""
    identities, mount = make_identities(n_identities, seed), installation(seed)
    rng = np.random.default_rng([seed, 2])
    ident = np.repeat(np.arange(n_identities), 2 * samples_per_class)
    facing = np.tile(np.repeat([0, 1], samples_per_class), n_identities)
    x = np.empty((len(ident), size, size), dtype=np.uint16)
    for i, (k, f) in enumerate(zip(ident, facing)):
        center = size / 2 + rng.normal(0, size * 0.03, 2)  # the tracker is not exact
        x[i] = render_depth_frame(identities[k], int(f), rng, (size, size), tuple(center), mount)
    n_id = n_identities

    def prior(useful: str, private: str) -> np.ndarray | None:
        # identity and facing are independent by design (as in OccuTherm, 6.1)
        if (useful, private) == ("facing", "identity"):
            return np.full((2, n_id), 1.0 / n_id)
        if (useful, private) == ("identity", "facing"):
            return np.full((n_id, 2), 0.5)
        return None

    return SensorDataset(
        name="synthetic-depth",
        x=x,
        attributes={"identity": ident.astype(np.int64), "facing": facing.astype(np.int64)},
        num_classes={"identity": n_identities, "facing": 2},
        modality="depth",
        sensor_range=DEPTH_RANGE_MM,
        units="depth in millimetres (0 = invalid)",
        synthetic=True,
        description=("SYNTHETIC overhead Kinect-like depth patches of people walking under a door "
                     f"(generated, not recorded; {n_identities} identities, facing in/out, seed {seed})"),
        class_names={"identity": [f"person {k}" for k in range(n_identities)], "facing": ["in", "out"]},
        prior_fn=prior,
    )


# --------------------------------------------------------------------------
# walkway: people in a real camera clip, found and followed on the clip itself
# --------------------------------------------------------------------------

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
    crops, masks, frames, tracks, centres, index = [], [], [], [], [], 0
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
    foreground = people["foreground"][keep]
    kept_tracks = np.unique(track)
    h, w = CROP_SHAPE
    small = x.reshape(len(x), 16, h // 16, 8, w // 8).mean((2, 4))             # (N, 16, 8)
    # the person against its own background: centre half of the width minus the outer quarters
    contrast = small[:, :, 2:6] - np.median(np.concatenate([small[:, :, :2], small[:, :, 6:]], 2), 2)[:, :, None]
    looks = np.stack([contrast[track == t].mean(0).ravel() for t in kept_tracks]) / 64.0
    track_cluster = _kmeans(looks, int(clusters), seed)
    appearance = track_cluster[np.searchsorted(kept_tracks, track)]
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
        camera={"frame": "person-crops", "detector": "motion", "crop_shape": [h, w], "margin": CROP_MARGIN,
                "crop_every": int(stride)})


# --------------------------------------------------------------------------
# MotionSense (device motion, as used by PASS appendix E.1 and MSDA)
# --------------------------------------------------------------------------

MOTIONSENSE_DIR = "A_DeviceMotion_data"
MOTIONSENSE_SUBJECTS = "data_subjects_info.csv"
MOTIONSENSE_ACTIVITIES = ("dws", "ups", "wlk", "jog")  # "sit" and "std" are excluded (appendix E.1)
MOTIONSENSE_WINDOW = 128
# Magnitudes of rotationRate (rad/s) and userAcceleration (g); the iPhone's gyroscope saturates at
# 2000 deg/s (34.9 rad/s) per axis, so 60 bounds both magnitudes.
MOTIONSENSE_RANGE = (0.0, 60.0)
_MOTION_AXES = {"rotationRate": ("x", "y", "z"), "userAcceleration": ("x", "y", "z")}


def _motionsense_files(path: Path) -> tuple[Path, Path]:
    """(the A_DeviceMotion_data folder, data_subjects_info.csv) under ``path``."""
    expected = (f"a folder holding {MOTIONSENSE_DIR}/<activity>_<trial>/sub_<n>.csv and "
                f"{MOTIONSENSE_SUBJECTS} (the unzipped MotionSense release)")
    if not path.is_dir():
        raise FileNotFoundError(f"MotionSense path not found or not a folder: {path}; expected {expected}")
    search = path.parent if path.name == MOTIONSENSE_DIR else path
    data = [path] if path.name == MOTIONSENSE_DIR else sorted(search.rglob(MOTIONSENSE_DIR))
    subjects = sorted(search.rglob(MOTIONSENSE_SUBJECTS))
    if not data or not subjects:
        raise ValueError(f"MotionSense source {path} lacks {MOTIONSENSE_DIR if not data else MOTIONSENSE_SUBJECTS}; "
                         f"expected {expected}")
    return data[0], subjects[0]


def _motionsense_genders(path: Path) -> dict[int, int]:
    """Subject code -> gender (0 female, 1 male), from data_subjects_info.csv."""
    lines = path.read_text().strip().splitlines()
    header = [h.strip() for h in lines[0].split(",")]
    if "code" not in header or "gender" not in header:
        raise ValueError(f"{path} lacks columns 'code' and 'gender'; got {header}")
    rows = [line.split(",") for line in lines[1:] if line.strip()]
    return {int(float(r[header.index("code")])): int(float(r[header.index("gender")])) for r in rows}


def _motion_magnitudes(csv_path: Path) -> np.ndarray:
    """(T, 2): |rotationRate| and |userAcceleration| per time step."""
    with open(csv_path) as handle:
        header = [h.strip().strip('"') for h in handle.readline().strip().split(",")]
    columns = [[f"{sensor}.{axis}" for axis in axes] for sensor, axes in _MOTION_AXES.items()]
    missing = [c for group in columns for c in group if c not in header]
    if missing:
        raise ValueError(f"{csv_path} lacks columns {missing}; expected MotionSense device-motion CSV columns")
    table = np.loadtxt(csv_path, delimiter=",", skiprows=1, ndmin=2)
    return np.stack([np.linalg.norm(table[:, [header.index(c) for c in group]], axis=1) for group in columns], 1)


def load_motionsense(path: str | None = None, split: str = "both", stride: int = 10) -> SensorDataset:
    """MotionSense device motion as PASS appendix E.1 / MSDA use it: the magnitudes of the gyroscope
    (rotationRate) and accelerometer (userAcceleration) in windows of 128 samples (stride ``stride``),
    activities dws, ups, wlk, jog ("sit" and "std" excluded).

    ``path``: the unzipped release (a folder holding ``A_DeviceMotion_data`` and
    ``data_subjects_info.csv``). Attributes: ``activity`` (4), ``gender`` (0 female, 1 male), ``id``
    (24 subjects) and ``trial_split``, the "trial" split: trials 1-9 train (0), trials 11-16 test (1).
    ``split`` keeps "train", "test" or "both". Samples are (2, 128) float32 in sensor units; the
    networks standardise each channel themselves (a leading BatchNorm).
    """
    if path is None:
        raise ValueError(f"motionsense needs path=: the unzipped MotionSense folder with {MOTIONSENSE_DIR}")
    splits = {"train": (0,), "test": (1,), "both": (0, 1)}
    if split not in splits:
        raise ValueError(f"unknown split {split!r}; expected one of {list(splits)}")
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    root, subjects_csv = _motionsense_files(Path(path))
    genders = _motionsense_genders(subjects_csv)
    subjects = sorted(genders)
    windows, labels = [], {"activity": [], "gender": [], "id": [], "trial_split": []}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        activity, _, trial = folder.name.partition("_")
        if activity not in MOTIONSENSE_ACTIVITIES or not trial.isdigit():
            continue
        test = int(int(trial) > 10)
        if test not in splits[split]:
            continue
        for csv_path in sorted(folder.glob("sub_*.csv")):
            subject = int(csv_path.stem.split("_")[1])
            if subject not in genders:
                raise ValueError(f"{csv_path}: subject {subject} is not in {MOTIONSENSE_SUBJECTS}")
            series = _motion_magnitudes(csv_path)
            if len(series) < MOTIONSENSE_WINDOW:
                continue
            cut = np.lib.stride_tricks.sliding_window_view(series, MOTIONSENSE_WINDOW, axis=0)[::stride]
            windows.append(cut.astype(np.float32))       # (n, 2, 128)
            for key, value in (("activity", MOTIONSENSE_ACTIVITIES.index(activity)), ("gender", genders[subject]),
                               ("id", subjects.index(subject)), ("trial_split", test)):
                labels[key].append(np.full(len(cut), value, dtype=np.int64))
    if not windows:
        raise ValueError(f"no MotionSense windows of {MOTIONSENSE_WINDOW} samples under {root} for split {split!r}; "
                         f"expected CSVs of at least {MOTIONSENSE_WINDOW} rows in {MOTIONSENSE_ACTIVITIES} trials")
    names = {"activity": list(MOTIONSENSE_ACTIVITIES), "gender": ["female", "male"],
             "id": [f"sub_{s}" for s in subjects], "trial_split": ["train (trials 1-9)", "test (trials 11-16)"]}
    return SensorDataset(
        name="motionsense", x=np.concatenate(windows), attributes={k: np.concatenate(v) for k, v in labels.items()},
        num_classes={k: len(v) for k, v in names.items()}, modality="timeseries", sensor_range=MOTIONSENSE_RANGE,
        units="channel 0: |rotationRate| rad/s, channel 1: |userAcceleration| g", synthetic=False,
        description=f"MotionSense device motion magnitudes, {MOTIONSENSE_WINDOW}-sample windows ({split})",
        class_names=names)


# --------------------------------------------------------------------------
# Adult income (UCI; TAPPFL's Table 2: income, private gender or marital status)
# --------------------------------------------------------------------------

ADULT_FILES = {"train": "adult.data", "test": "adult.test"}
ADULT_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
                 "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
                 "income")
# Numeric columns scaled by fixed bounds (adult.names' ranges, rounded out), so a row's features never
# depend on which rows were loaded; values beyond them clip to [0, 1].
ADULT_NUMERIC = {"age": (0.0, 100.0), "fnlwgt": (0.0, 1.5e6), "education-num": (0.0, 16.0),
                 "capital-gain": (0.0, 1e5), "capital-loss": (0.0, 5000.0), "hours-per-week": (0.0, 100.0)}
# Categorical columns one-hot over adult.names' values; "?" (missing) sets no bit.
ADULT_CATEGORIES = {
    "workclass": ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
                  "Without-pay", "Never-worked"),
    "education": ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
                  "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"),
    "occupation": ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
                   "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
                   "Priv-house-serv", "Protective-serv", "Armed-Forces"),
    "relationship": ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "native-country": ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                       "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
                       "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
                       "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
                       "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
                       "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands"),
}
# The attributes, coded as TAPPFL's appendix B numbers them (marital status in alphabetical order).
ADULT_ATTRIBUTES = {
    "income": ("income", ("<=50K", ">50K")),
    "gender": ("sex", ("Female", "Male")),
    "marital_status": ("marital-status", ("Divorced", "Married-AF-spouse", "Married-civ-spouse",
                                          "Married-spouse-absent", "Never-married", "Separated", "Widowed")),
}


def _adult_text(path: Path, name: str) -> str:
    """One of the CSVs from a folder, the file itself, or a zip holding it (any subfolder)."""
    expected = f"a folder or .zip holding {' and '.join(ADULT_FILES.values())}, or {name} itself"
    if path.is_file() and path.name == name:
        return path.read_text()
    if path.is_dir():
        hits = sorted(path.rglob(name))
        if hits:
            return hits[0].read_text()
    elif path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            members = sorted(m for m in zf.namelist() if m.rsplit("/", 1)[-1] == name)
            if members:
                return zf.read(members[0]).decode()
    elif not path.exists():
        raise FileNotFoundError(f"Adult path not found: {path} (expected {expected})")
    raise ValueError(f"Adult source {path} lacks {name}; expected {expected}")


def _adult_rows(text: str, name: str) -> list[list[str]]:
    """The records of adult.data / adult.test: 15 comma-separated fields; adult.test starts with a
    "|1x3 Cross validator" line and ends its labels with "."."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("|"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(ADULT_COLUMNS):
            raise ValueError(f"{name} line {number} has {len(fields)} fields; expected {len(ADULT_COLUMNS)} "
                             f"({', '.join(ADULT_COLUMNS)})")
        fields[-1] = fields[-1].rstrip(".")
        rows.append(fields)
    return rows


def _adult_code(values: list[str], names: tuple, column: str) -> np.ndarray:
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"Adult column {column!r} has value(s) {unknown[:3]}; expected one of {list(names)}")
    index = {n: i for i, n in enumerate(names)}
    return np.array([index[v] for v in values], dtype=np.int64)


def _adult_features(columns: dict) -> np.ndarray:
    parts = [np.clip((np.asarray(columns[c], dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0)[:, None]
             for c, (lo, hi) in ADULT_NUMERIC.items()]
    for column, names in ADULT_CATEGORIES.items():
        index = {n: i for i, n in enumerate(names)}
        onehot = np.zeros((len(columns[column]), len(names)))
        for row, value in enumerate(columns[column]):
            if value in index:                       # "?" marks a missing value
                onehot[row, index[value]] = 1.0
        parts.append(onehot)
    return np.concatenate(parts, axis=1).astype(np.float32)


def load_adult(path: str | None = None, split: str = "train") -> SensorDataset:
    """UCI Adult income from a user-given path (a folder or .zip with adult.data / adult.test, or one
    of the files). ``split``: "train" (adult.data, the 32,561 rows TAPPFL splits 80/20), "test"
    (adult.test) or "both". Attributes: ``income`` (0 <=50K, 1 >50K), ``gender`` (0 female, 1 male),
    ``marital_status`` (7 values, TAPPFL appendix B's order). x: the other 12 columns, numeric ones
    scaled to [0, 1] by fixed bounds, categorical ones one-hot (96 features); sex, marital status and
    income are left out of x, so the private attribute reaches x only through correlated columns such
    as relationship."""
    if path is None:
        raise ValueError("adult needs path=: a folder or .zip with adult.data / adult.test (UCI Adult)")
    files = {"train": ("train",), "test": ("test",), "both": ("train", "test")}
    if split not in files:
        raise ValueError(f"unknown split {split!r}; expected one of {list(files)}")
    rows = [r for part in files[split]
            for r in _adult_rows(_adult_text(Path(path), ADULT_FILES[part]), ADULT_FILES[part])]
    if not rows:
        raise ValueError(f"no Adult records under {path} for split {split!r}")
    columns = {c: [r[i] for r in rows] for i, c in enumerate(ADULT_COLUMNS)}
    attributes = {a: _adult_code(columns[c], names, c) for a, (c, names) in ADULT_ATTRIBUTES.items()}
    return SensorDataset(
        name="adult", x=_adult_features(columns), attributes=attributes,
        num_classes={a: len(names) for a, (_, names) in ADULT_ATTRIBUTES.items()}, modality="vector",
        sensor_range=(0.0, 1.0), units="numeric columns scaled to [0, 1] by fixed bounds, categories one-hot",
        synthetic=False, description=f"UCI Adult income ({split}), 96 features",
        class_names={a: list(names) for a, (_, names) in ADULT_ATTRIBUTES.items()})


# --------------------------------------------------------------------------
# npz
# --------------------------------------------------------------------------

_NPZ_RESERVED = ("x", "sensor_min", "sensor_max", "modality")


def load_npz(path: str | None = None) -> SensorDataset:
    """``.npz`` with ``x`` and one integer array (length N) per attribute;
    optional scalars ``sensor_min``, ``sensor_max`` and ``modality``."""
    if path is None:
        raise ValueError("npz needs path=: a .npz file with array 'x' and one integer array per attribute")
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"npz file not found: {p}")
    with np.load(p, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    if "x" not in arrays:
        raise ValueError(f"{p} has no array 'x'; expected 'x' plus one integer array per attribute")
    x = arrays["x"]
    attributes = {}
    for key in sorted(set(arrays) - set(_NPZ_RESERVED)):
        a = arrays[key]
        if a.shape != (len(x),) or not np.issubdtype(a.dtype, np.integer) or (a.size and a.min() < 0):
            raise ValueError(f"{p}: attribute {key!r} must be non-negative integers of shape ({len(x)},), "
                             f"got {a.dtype} {a.shape}")
        attributes[key] = a.astype(np.int64)
    lo = float(arrays["sensor_min"]) if "sensor_min" in arrays else float(x.min()) if x.size else 0.0
    hi = float(arrays["sensor_max"]) if "sensor_max" in arrays else float(x.max()) if x.size else 0.0
    modality = str(arrays["modality"]) if "modality" in arrays else ("vector" if x.ndim == 2 else "image")
    return SensorDataset(
        name=p.stem,
        x=x,
        attributes=attributes,
        num_classes={k: int(v.max()) + 1 if v.size else 0 for k, v in attributes.items()},
        modality=modality,
        sensor_range=(lo, hi),
        units="as stored",
        synthetic=False,
        description=f"loaded from {p}",
        class_names={k: [] for k in attributes},
    )


# --------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------

_LOADERS: dict[str, Callable[..., SensorDataset]] = {
    "digits": lambda path=None: load_digits_dataset(),
    "ujiindoorloc": load_ujiindoorloc,
    "synthetic-depth": lambda path=None, **kw: load_synthetic_depth(**kw),
    "npz": load_npz,
    "motionsense": load_motionsense,
    "adult": load_adult,
    "walkway": load_walkway,
}
DATASETS = tuple(_LOADERS)
_OPTIONS = {
    "digits": (),
    "ujiindoorloc": ("split", "max_rows"),
    "synthetic-depth": ("n_identities", "samples_per_class", "seed", "size"),
    "npz": (),
    "motionsense": ("split", "stride"),
    "adult": ("split",),
    "walkway": ("clusters", "train_fraction", "stride", "min_track", "min_speed", "seed"),
}


def load_dataset(name: str, path: str | None = None, **options) -> SensorDataset:
    """Load a registered dataset by name (see :data:`DATASETS`)."""
    key = name.lower() if isinstance(name, str) else name
    if key not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r}; expected one of {list(DATASETS)}")
    unknown = sorted(set(options) - set(_OPTIONS[key]))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for dataset {key!r}; expected from {list(_OPTIONS[key])}")
    if path is not None:
        path = os.fspath(path)
    return _LOADERS[key](path, **options)
