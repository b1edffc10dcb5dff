"""The dataset record every loader returns, and the row selections the loaders and the protocols share."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

PriorFn = Callable[[str, str], "np.ndarray | None"]
# A dataset that ships its own test split (walkway's time split, MotionSense's trials, UJIIndoorLoc's
# validationData with test_split="validation") labels every row with this attribute: 0 train, 1 test.
# The protocols (evaluation.dataset_slices, PASS's split_rows) then deal every training slice from the
# rows labelled 0 and score on exactly the rows labelled 1; without it they deal all rows at random.
SPLIT_ATTRIBUTE = "trial_split"


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
    # Camera crops: when and where each was taken, (N, 2) float: the frame index and the box's centre x (a
    # bank row that no camera filmed: -1, nan). The release keeps both by design; the identity audit links by them.
    timeline: np.ndarray | None = field(default=None, repr=False, compare=False)
    # Camera crops in colour (N, H, W, 3 uint8 BGR), the same crops as ``x``: a substitution bundle ships
    # its bank people in colour too, and the camera release pastes them so (the model decides on grey).
    colour: np.ndarray | None = field(default=None, repr=False, compare=False)
    # Loader options that stand in for the caller's in a run's record (None: drop that option): a step whose
    # outcome depends on more than its options (the bank screen's detector run on a clip) is recorded by its
    # outcome, so export and the audits reload these very rows without running it again.
    recorded_options: dict | None = field(default=None, compare=False)

    @property
    def sample_shape(self) -> tuple:
        return tuple(self.x.shape[1:])

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def test_rows(self) -> np.ndarray | None:
        """The rows the dataset fixes as its test split (``SPLIT_ATTRIBUTE`` == 1); None when it has none."""
        split = self.attributes.get(SPLIT_ATTRIBUTE)
        return None if split is None else np.flatnonzero(split == 1)

    def subset(self, idx) -> "SensorDataset":
        """New dataset with rows ``idx`` (index array or boolean mask)."""
        idx = np.asarray(idx)
        return replace(
            self,
            x=self.x[idx],
            attributes={k: v[idx] for k, v in self.attributes.items()},
            foreground=None if self.foreground is None else self.foreground[idx],
            colour=None if self.colour is None else self.colour[idx],
            timeline=None if self.timeline is None else self.timeline[idx],
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
# helpers shared by the loaders
# --------------------------------------------------------------------------


def _reindex(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    uniq, inv = np.unique(values.astype(np.int64), return_inverse=True)
    return inv.astype(np.int64), [str(v) for v in uniq]


def _stratified_take(strata: np.ndarray, max_rows: int) -> np.ndarray:
    """Deterministic systematic sample: evenly spaced rows of the strata-sorted
    order, so each stratum keeps roughly its share."""
    order = np.argsort(strata, kind="stable")
    pick = np.linspace(0, len(order) - 1, max_rows).round().astype(np.int64)
    return np.sort(order[np.unique(pick)])
