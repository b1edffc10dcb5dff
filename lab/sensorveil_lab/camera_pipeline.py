"""The camera pipeline as the lab scripts stream it: the bundle loaded as `sensorveil run` loads it, the draw
stage's output a stream releases, and which downstream counter's people lie outside every privatized window
(scripts/reveal_rules.py). The camera pages' own figures come from the camera audit (sensorveil camera-audit)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def stream_privatizer(bundle: Path, seed: "int | None" = None):
    """The bundle loaded as `sensorveil run`/`preview` load it (``load_for_stream``): its colour release, and
    the "shared" CPU policy whose threads sleep between runs. The library default ("dedicated") spins its
    threads after each run, and the page's CPU per frame then counted that spinning, which no stream spends."""
    from sensorveil.runtime.stream import load_for_stream
    return load_for_stream(bundle, seed=seed)


def release_output(bundle: Path) -> str:
    """The draw stage's output a stream releases (runtime.stream.load_for_stream): "colour" for a camera bundle
    whose bank people come in colour, else the grey "sample"."""
    from sensorveil.runtime.bundle import open_bundle
    loaded = open_bundle(bundle)
    declared = loaded.declared
    return (declared.stream_output(loaded.manifest) if declared is not None else None) or "sample"


def outside_windows(boxes, windows, shape) -> list:
    """The boxes of a downstream counter's people in the released frame that lie mostly (over half their
    box) outside every window the pipeline privatized: in a window release, people the detector missed,
    released as the camera saw them; in a cut-out release (nothing of the camera but the quiet scene) changes
    of that scene, which RevealClock tells apart."""
    privatized = np.zeros(shape, dtype=bool)
    for x0, y0, x1, y1 in windows:
        privatized[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = True
    return [(x, y, w, h) for x, y, w, h in boxes if privatized[y : y + h, x : x + w].mean() < 0.5]

