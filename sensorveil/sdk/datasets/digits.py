"""digits: scikit-learn's 8x8 handwritten digits (PR-GAN section 6.1)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from sensorveil.sdk.datasets.base import SensorDataset

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
