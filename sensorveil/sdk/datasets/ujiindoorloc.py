"""UJIIndoorLoc: WiFi fingerprints, binarised heard / not heard (PR-GAN section 6.1)."""
from __future__ import annotations

import functools
import io
import zipfile
from pathlib import Path

import numpy as np

from sensorveil.sdk.datasets.base import SPLIT_ATTRIBUTE, SensorDataset, _reindex, _stratified_take

UJI_CSVS = ("trainingData.csv", "validationData.csv")
UJI_NUM_WAPS = 520
UJI_NOT_HEARD = 100  # RSSI code for "access point not detected"
UJI_FLOORS_PER_BUILDING = (4, 4, 5)
# Fixed building-floor index so labels never depend on which rows were loaded.
UJI_FLOOR_OFFSET = tuple(int(v) for v in np.cumsum((0,) + UJI_FLOORS_PER_BUILDING[:-1]))
UJI_NUM_FLOORS = sum(UJI_FLOORS_PER_BUILDING)  # 13
UJI_REGIONS_PER_FLOOR = 8
_UJI_META = ("LONGITUDE", "LATITUDE", "FLOOR", "BUILDINGID", "SPACEID", "USERID", "PHONEID")
# test_split "held-out-users": the test rows are these trainingData.csv users' (USERID; 4 of 18 users, 6,058 of
# 19,937 rows), a stand-in for validationData's new users and phones that leaves validationData.csv untouched.
# Rule: the test rows hold all 13 floors, every floor keeps training rows of other users, and no training user
# carries a held-out user's phone; users added greedily, most floors not yet held first, then fewest rows:
# 11 (PHONEID 13; floors 0-5, 10, 11), 10 (PHONEID 8; 6-8), 3 (PHONEID 16; 12), 12 (PHONEID 24; 9).  Building 0 has
# users 1 and 11 only; users 1, 9 and 16 share PHONEID 14.
UJI_HELD_OUT_USERS = (3, 10, 11, 12)


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

    Edges come from the ``is_train`` rows only, so a row's region never
    depends on the subset that is loaded.
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
    held_out = is_train & np.isin(meta["USERID"], UJI_HELD_OUT_USERS)
    # test_split "held-out-users" learns from the other users' rows only, so its region edges are theirs
    held_out_region = _uji_regions(floor, meta["LONGITUDE"], meta["LATITUDE"], is_train & ~held_out)
    for a in (*attrs.values(), heard, held_out, held_out_region):
        a.setflags(write=False)  # shared by every load through the cache
    return {"x": heard, "attributes": attrs, "is_train": is_train, "held_out": held_out,
            "held_out_region": held_out_region, "names": names}


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


UJI_TEST_SPLITS = ("random", "validation", "held-out-users")
UJI_SPLIT_NAMES = {
    "validation": ["train (trainingData.csv)", "test (validationData.csv)"],
    "held-out-users": ["train (trainingData.csv, other users)",
                       f"test (trainingData.csv, users {', '.join(map(str, UJI_HELD_OUT_USERS))})"],
}
# the CSVs each fixed test split needs loaded, and why
UJI_SPLIT_NEEDS = {
    "validation": ("both", "trainingData rows to learn from and validationData rows to score on"),
    "held-out-users": ("train", "its train and test rows are all trainingData rows; validationData rows play no "
                                "part"),
}


def load_ujiindoorloc(path: str | None = None, split: str = "both", max_rows: int | None = None,
                      test_split: str = "random") -> SensorDataset:
    """UJIIndoorLoc WiFi fingerprints as binary "heard / not heard" vectors.

    ``path``: the UJIIndoorLoc zip (CSVs may sit in a subfolder) or a folder
    with ``trainingData.csv`` and ``validationData.csv``.  ``split``: "train",
    "validation" or "both" (concatenated, 19,937 + 1,111 = 21,048 rows).
    ``max_rows``: deterministic subset stratified by region, for fast tests.
    ``test_split``: where runs are scored.  "random" (default): the protocol's
    stratified slices dealt from every loaded row.  "validation" (needs split
    "both"): every model and attacker learns from trainingData rows only and
    the test rows are exactly the validationData rows (other users and phones,
    months later); the rows carry ``trial_split`` (0 train, 1 test), the
    dataset's own split that the protocols honour.  "held-out-users" (needs
    split "train"): the same for trainingData.csv alone, its test rows those
    of the users in ``UJI_HELD_OUT_USERS`` (whose phones no other training user
    has; see the comment there), so settings can be chosen without
    validationData rows.  With ``max_rows`` the train and the test part are
    each subset on their own, stratified by region, in proportion to size.

    Attributes: ``building`` (3); ``floor``, the 13 building-floors numbered
    building 0 floors 0-3 -> 0-3, building 1 floors 0-3 -> 4-7, building 2
    floors 0-4 -> 8-12; ``region`` = floor * 8 + r (104), where within each
    floor, using the *training* CSV rows of that floor only, LONGITUDE is cut
    at its 25/50/75 % quantiles into 4 bins (bin = number of edges <= value)
    and each bin is cut at its LATITUDE median (r = 2 * bin + (lat > median)),
    giving 8 regions of about equal training counts; validation rows are
    assigned with the same edges.  Under test_split "held-out-users" the
    edges come from the other users' rows alone (the held-out users' rows
    are assigned with them), just as validationData rows play no part in
    the edges of the other splits: every region then has rows to learn from
    and the prior's equal regions hold for them.  Its regions therefore
    differ a little from the other splits' (some rows move to a neighbouring region).
    ``space``, ``user``, ``phone`` re-index
    SPACEID, USERID, PHONEID over both CSVs (validation rows have SPACEID and
    USERID 0, which becomes class 0).
    """
    if path is None:
        raise ValueError("ujiindoorloc needs path=: the UJIIndoorLoc zip or a folder with "
                         f"{UJI_CSVS}")
    check_test_split(split, test_split)
    data = _load_uji_arrays(str(Path(path).resolve()))
    rows = _uji_rows(data, split, test_split, max_rows)
    attributes, names = _uji_labels(data, test_split, rows)
    scored = f"; test rows: {names[SPLIT_ATTRIBUTE][1][len('test ('):-1]}" if SPLIT_ATTRIBUTE in names else ""
    return SensorDataset(
        name="ujiindoorloc",
        x=data["x"][rows],
        attributes=attributes,
        num_classes={k: len(v) for k, v in names.items()},
        modality="vector",
        sensor_range=(0.0, 1.0),
        units="access point heard (1) / not heard (0), from RSSI != 100",
        synthetic=False,
        description=f"UJIIndoorLoc WiFi fingerprints ({split}{scored}), 520 access points binarised",
        class_names=names,
        prior_fn=_uji_prior,
    )


def check_test_split(split: str, test_split: str) -> None:
    """Fail closed on the split options before anything is read."""
    splits = ("train", "validation", "both")
    if split not in splits:
        raise ValueError(f"unknown split {split!r}; expected one of {list(splits)}")
    if test_split not in UJI_TEST_SPLITS:
        raise ValueError(f"ujiindoorloc option test_split={test_split!r} is unknown; expected one of "
                         f"{list(UJI_TEST_SPLITS)} (\"validation\": train on trainingData.csv, score on "
                         "validationData.csv; \"held-out-users\": train and score on trainingData.csv, users "
                         f"{', '.join(map(str, UJI_HELD_OUT_USERS))} held out)")
    needed, why = UJI_SPLIT_NEEDS.get(test_split, (split, ""))
    if split != needed:
        raise ValueError(f"ujiindoorloc option test_split={test_split!r} needs split={needed!r} ({why}); "
                         f"got split={split!r}")


def _uji_attributes(data: dict, test_split: str) -> dict:
    """Every row's attributes; "held-out-users" has its own region edges (see :func:`load_ujiindoorloc`)."""
    if test_split == "held-out-users":
        return {**data["attributes"], "region": data["held_out_region"]}
    return data["attributes"]


def _uji_labels(data: dict, test_split: str, rows: np.ndarray) -> tuple[dict, dict]:
    """The loaded rows' attributes and every attribute's class names; a fixed test split adds ``trial_split``."""
    attributes = {k: v[rows] for k, v in _uji_attributes(data, test_split).items()}
    names = _uji_names() | data["names"]
    if test_split in UJI_SPLIT_NAMES:
        attributes[SPLIT_ATTRIBUTE] = _uji_test_mask(data, test_split)[rows].astype(np.int64)
        names[SPLIT_ATTRIBUTE] = list(UJI_SPLIT_NAMES[test_split])
    return attributes, names


def _uji_test_mask(data: dict, test_split: str) -> np.ndarray:
    """Over every row of both CSVs: the test rows of a fixed test split."""
    return ~data["is_train"] if test_split == "validation" else data["held_out"]


def _uji_rows(data: dict, split: str, test_split: str, max_rows: int | None) -> np.ndarray:
    """The loaded rows, in file order; ``max_rows`` takes a region-stratified subset of the whole
    (test_split "random") or of the train and the test part in proportion to their sizes (a fixed split)."""
    splits = {"train": (True,), "validation": (False,), "both": (True, False)}
    rows = np.flatnonzero(np.isin(data["is_train"], splits[split]))
    region = _uji_attributes(data, test_split)["region"]
    if max_rows is None or max_rows >= len(rows):
        return rows
    if test_split == "random":
        return rows[_stratified_take(region[rows], int(max_rows))]
    if max_rows < 2:
        raise ValueError(f"ujiindoorloc max_rows={max_rows} with test_split={test_split!r}: expected 2 or more "
                         "(at least one training and one test row)")
    is_test = _uji_test_mask(data, test_split)[rows]
    train, test = rows[~is_test], rows[is_test]
    n_test = min(max(1, round(max_rows * len(test) / len(rows))), int(max_rows) - 1)
    parts = [(train, int(max_rows) - n_test), (test, n_test)]
    return np.sort(np.concatenate([part[_stratified_take(region[part], size)] for part, size in parts]))
