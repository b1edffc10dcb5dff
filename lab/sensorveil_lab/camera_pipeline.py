"""The whole camera pipeline over a clip, as `sensorveil run` streams it, with everything the camera pages count on
the way: detections, each downstream counter on the raw and privatized video, people outside the privatized
windows, and the leak meter."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.leak_meter import LeakMeter, TiledPeople
from sensorveil.runtime.camera.learned import DETECTOR_GRAPH
from sensorveil_lab.clips import clip_empty_scene, scene_truth, truth_boxes
from sensorveil_lab.people_counters import count_figures, counters
from sensorveil_lab.scene_reveals import RevealClock


def pipeline_on_clip(bundle: Path, clip: Path, sheet_frames: list, seed: int | None = None, leaks: bool = True,
                     offline_graph=None) -> dict:
    """The whole camera pipeline over the clip, torch-free code only: decode, detect, privatize every
    crop, paste back. Counts per frame: the pipeline's detections, and each counter of ``COUNTERS`` run
    afresh on the raw and on the privatized video (what a people counter downstream would see). The release
    is the one `sensorveil run` makes: bank people in colour where the bundle carries them in colour.
    ``offline_graph``: the graph runner the leak meter's tiled detector uses (default: the bundle's own), so
    bundles whose detectors differ are judged against the same people."""
    from sensorveil.runtime.camera import iou
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream

    stream = Stream(stream_privatizer(bundle, seed), open_source(str(clip), prefetch=False))
    privatizer = stream.privatizer
    learned = DETECTOR_GRAPH in privatizer.pipeline.graphs     # the bundle's own detector also looks, on tiles
    truth, empty = scene_truth(clip)
    offline = TiledPeople(offline_graph or privatizer.pipeline.run_graph) if learned else None
    if truth is not None:     # a made scene: its recorded people are looked at too
        offline = truth_boxes(truth, offline)
    meter = LeakMeter(clip_empty_scene(clip) if empty is None else empty, offline=offline) if leaks else None
    pairs = counters()
    counted = {name: ([], []) for name in pairs}
    detected, unprivatized, undetected, kept = [], [], {name: 0 for name in pairs}, {}
    reveals, over_reveals = RevealClock(), []
    pipeline_cpu = pipeline_wall = 0.0
    frames = 0
    iterator = iter(stream)
    while True:
        c0, w0 = time.process_time(), time.perf_counter()
        result = next(iterator, None)
        pipeline_cpu += time.process_time() - c0
        pipeline_wall += time.perf_counter() - w0
        if result is None:
            break
        frames += 1
        detected.append(len(result.sample))
        reveals.note(getattr(stream.preprocessor, "scene", None), result.frame.index)
        if meter is not None:
            meter.add(result.frame.index, result.frame.data, result.output, stream.preprocessor.last_boxes,
                      stream.preprocessor.last_windows)
        for name, (on_raw, on_private) in pairs.items():
            raw_boxes, found = on_raw(result.frame.data), on_private(result.output)
            counted[name][0].append(len(raw_boxes))
            counted[name][1].append(len(found))
            # the counter's people in the raw frame that the pipeline's detector did not find: the release
            # leaves them out (cut-out) or sends them as they are (window), so no paste can count them
            if len(raw_boxes):
                pipeline_boxes = stream.preprocessor.last_boxes
                undetected[name] += (
                    int((iou(raw_boxes, pipeline_boxes).max(1) < 0.3).sum()) if len(pipeline_boxes) else len(raw_boxes)
                )
            if name == "pipeline":
                outside = outside_windows(found, stream.preprocessor.last_windows, result.output.shape[:2])
                unprivatized.append(len(outside))
                over_reveals.append(reveals.over_recent(outside, result.frame.index))
        if result.frame.index in sheet_frames:
            kept[result.frame.index] = (result.frame.data.copy(), result.output.copy())
    detected = np.asarray(detected)
    report = stream.report()
    counts = {name: {**count_figures(*counted[name]), "undetected_people": undetected[name]} for name in pairs}
    return {
        "frames": frames,
        "fps": frames / pipeline_wall,
        "cpu_ms_per_frame": 1e3 * pipeline_cpu / frames,
        "wall_ms_per_frame": 1e3 * pipeline_wall / frames,
        "stage_ms_median": {
            k: v.get("p50") if isinstance(v, dict) else v for k, v in report.get("stages_ms", {}).items()
        },
        "people_per_frame_mean": float(detected.mean()),
        "crops_privatized": int(detected.sum()),
        "counts": counts,
        "unprivatized_people": int(sum(unprivatized)),
        "counted_private_people": counts["pipeline"]["private_people"],
        "frames_with_unprivatized": int(sum(n > 0 for n in unprivatized)),
        # of those, over a block the quiet scene began showing in the last REVEAL_RECENT frames (None: no quiet scene)
        "unprivatized_over_reveals": None if None in over_reveals else int(sum(over_reveals)),
        "leak_meter": meter.figures() if meter is not None else None,
        "_sheet": kept,
    }


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

