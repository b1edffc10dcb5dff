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

One module per dataset; :mod:`.registry` maps names to loaders.
"""
from sensorveil.sdk.datasets.adult import (
    ADULT_ATTRIBUTES,
    ADULT_CATEGORIES,
    ADULT_COLUMNS,
    ADULT_FILES,
    ADULT_NUMERIC,
    load_adult,
)
from sensorveil.sdk.datasets.base import PriorFn, SensorDataset, stratified_slices
from sensorveil.sdk.datasets.digits import load_digits_dataset
from sensorveil.sdk.datasets.motionsense import (
    MOTIONSENSE_ACTIVITIES,
    MOTIONSENSE_DIR,
    MOTIONSENSE_RANGE,
    MOTIONSENSE_SUBJECTS,
    MOTIONSENSE_WINDOW,
    load_motionsense,
)
from sensorveil.sdk.datasets.npz import load_npz
from sensorveil.sdk.datasets.registry import DATASETS, load_dataset
from sensorveil.sdk.datasets.synthetic_depth import (
    DEPTH_RANGE_MM,
    KINECT_FOCAL_PX,
    BodyParams,
    installation,
    load_synthetic_depth,
    make_identities,
    render_depth_frame,
    synthetic_depth_frames,
)
from sensorveil.sdk.datasets.ujiindoorloc import (
    UJI_CSVS,
    UJI_FLOOR_OFFSET,
    UJI_FLOORS_PER_BUILDING,
    UJI_NOT_HEARD,
    UJI_NUM_FLOORS,
    UJI_NUM_WAPS,
    UJI_REGIONS_PER_FLOOR,
    load_ujiindoorloc,
)
from sensorveil.sdk.datasets.walkway import SPLIT_BY_TIME, WALKWAY_DIRECTIONS, load_walkway

__all__ = [
    "DATASETS", "load_dataset",
    "PriorFn", "SensorDataset", "stratified_slices",
    "load_digits_dataset",
    "UJI_CSVS", "UJI_NUM_WAPS", "UJI_NOT_HEARD", "UJI_FLOORS_PER_BUILDING", "UJI_FLOOR_OFFSET", "UJI_NUM_FLOORS",
    "UJI_REGIONS_PER_FLOOR", "load_ujiindoorloc",
    "DEPTH_RANGE_MM", "KINECT_FOCAL_PX", "BodyParams", "installation", "make_identities", "render_depth_frame",
    "synthetic_depth_frames", "load_synthetic_depth",
    "WALKWAY_DIRECTIONS", "SPLIT_BY_TIME", "load_walkway",
    "MOTIONSENSE_DIR", "MOTIONSENSE_SUBJECTS", "MOTIONSENSE_ACTIVITIES", "MOTIONSENSE_WINDOW", "MOTIONSENSE_RANGE",
    "load_motionsense",
    "ADULT_FILES", "ADULT_COLUMNS", "ADULT_NUMERIC", "ADULT_CATEGORIES", "ADULT_ATTRIBUTES", "load_adult",
    "load_npz",
]
