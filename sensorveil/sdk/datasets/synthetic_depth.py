"""Synthetic overhead depth (OccuTherm-like door sensor): generated Kinect depth patches of people
walking under a door, clearly synthetic."""
from __future__ import annotations

import numpy as np

# One renderer for the stream source and this dataset: it lives in the torch-free runtime
# (which may not import sdk), and the dataset imports it from there.
from sensorveil.runtime.synthetic_depth import (  # noqa: F401  (re-exported public names)
    DEPTH_RANGE_MM,
    KINECT_FOCAL_PX,
    BodyParams,
    installation,
    make_identities,
    render_depth_frame,
    synthetic_depth_frames,
)
from sensorveil.sdk.datasets.base import SensorDataset


def load_synthetic_depth(n_identities: int = 20, samples_per_class: int = 160, seed: int = 0,
                         size: int = 180) -> SensorDataset:
    """Synthetic ``size`` x ``size`` depth patches centred (with a tracker's jitter) on a person
    walking under one Kinect v2 installation; ``samples_per_class`` frames per (identity,
    facing), each rendered afresh (pose, stride, noise): 6,400 frames for 20 people. The size is what the
    protocol's D_z needs: trained on slice 1 (a third), the depth classifier tells the 20 people apart less
    well from fewer frames (``python scripts/depth_raw_accuracy.py --samples-per-class N`` prints its raw
    figures on slice 3 for N; docs/depth_raw_accuracy.md holds them at the default). The frames allow more
    than it reads: ``--trees`` prints what trees on each frame's depth histogram reach."""
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
