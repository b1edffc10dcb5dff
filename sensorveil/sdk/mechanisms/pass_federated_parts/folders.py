"""Each device's rows in a folder of its own, the only data a node reads.

Before a federation starts, the trainer writes device k's rows (model units) and their labels to
``device-k/rows.npz`` under the run's devices folder (as a testbed provisions its devices; a deployed
device holds the same file in a folder of its own). A node opens only the folder it is given: its
SuperNode's ``--node-config data-path=FOLDER`` in a deployment, ``device-{partition-id}`` of the task's
devices folder in a simulation. Nothing of the dataset itself is read by a node."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sensorveil.sdk.mechanisms.pass_parts.data import PassData

DEVICES_DIR = "devices"
ROWS_FILE = "rows.npz"


def device_folder(root, device: int) -> Path:
    return Path(root) / f"device-{int(device)}"


def write_device_folders(root, data: PassData, parts: list) -> list[Path]:
    """device-k/rows.npz for every device k: x (model units), one label array per private and useful
    attribute (private_0 ..., useful_0 ...), and the condition attribute's values when the draw is conditioned.
    Each file is written beside its target and renamed into place."""
    folders = []
    for k, rows in enumerate(parts):
        folder = device_folder(root, k)
        folder.mkdir(parents=True, exist_ok=True)
        arrays = {"x": data.x[rows].numpy()}
        arrays.update({f"private_{i}": data.labels(a)[rows] for i, a in enumerate(data.private)})
        arrays.update({f"useful_{i}": data.labels(a)[rows] for i, a in enumerate(data.useful)})
        if data.condition is not None:
            arrays["known"] = data.known(rows)
        partial = folder / (ROWS_FILE + ".partial")
        with open(partial, "wb") as handle:
            np.savez(handle, **arrays)
        os.replace(partial, folder / ROWS_FILE)
        folders.append(folder)
    return folders


def read_device_folder(folder) -> dict:
    """The arrays of ``folder``/rows.npz, or one clear error naming the folder."""
    path = Path(folder) / ROWS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: expected this device's rows in its own folder (the trainer "
                                "writes device-k/rows.npz; a deployed SuperNode names its folder with "
                                "--node-config data-path=FOLDER)")
    with np.load(path, allow_pickle=False) as saved:
        return {name: saved[name] for name in saved.files}
