"""MotionSense (device motion, as used by PASS appendix E.1 and MSDA)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sensorveil.sdk.datasets.base import SensorDataset

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
