"""Adult income (UCI; TAPPFL's Table 2: income, private gender or marital status)."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from sensorveil.sdk.datasets.base import SensorDataset

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
