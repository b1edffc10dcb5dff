"""The leak meter's rule (sensorveil/benchmarks/leak_meter.py GHOST_SHARE), measured on a clip.

Runs a camera bundle's pipeline over the clip and, for every person box the meter's offline detectors find
and the pipeline did not cover, reads ``person_share`` on the release and on known releases put in its place
(pasted pixels kept): the empty scene and a neutral grey (no person: must read about 0), ghosts of the raw
frame blended in at 0.1, 0.2 and 0.3 (must read about that), and the raw frame (1). The null rows say how
far from the rule a release that shows nobody reads; the ghost rows say what the rule catches. The previous
rule (the release correlates with the raw frame more than with the empty scene, and by 0.3, on the whole box
grown by a quarter) is read on the release too. The figures of docs/decisions/0007-leak-meter-share.md:

    python scripts/leak_meter_rule.py --bundle bundles/camera/pass-walkway --clip ../shared/media/walkway.avi
"""
import argparse
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.leak_meter import (
    CONTEXT,
    GHOST_SHARE,
    LeakMeter,
    TiledPeople,
    pasted_mask,
    person_share,
    to_grey,
)
from sensorveil_lab.clips import clip_empty_scene, scene_truth, truth_boxes

ROOT = Path(__file__).resolve().parents[1]

PERCENTILES = (1, 50, 99, 100)


def variants(raw, released, empty):
    """The releases each box is read on, by name (pasted pixels keep the pipeline's output)."""
    yield "the pipeline's release", released
    yield "empty scene (no person)", empty
    yield "neutral grey (no person)", np.full_like(released, 128.0)
    for share in (0.1, 0.2, 0.3):
        yield f"ghost {share} of the raw frame", share * raw + (1 - share) * released
    yield "the raw frame", raw


def previous_rule(raw, released, empty, box, pasted) -> bool:
    """The rule before 0007: correlation with raw above correlation with the empty scene, and >= 0.3."""
    x, y, w, h = (int(v) for v in box)
    gx, gy = max(int(CONTEXT * w), 2), max(int(CONTEXT * h), 2)
    rows, cols = slice(max(y - gy, 0), y + h + gy), slice(max(x - gx, 0), x + w + gx)
    judged = ~pasted[rows, cols]
    r, x_raw, e = released[rows, cols][judged], raw[rows, cols][judged], empty[rows, cols][judged]
    with_raw, with_empty = correlation(r, x_raw), correlation(r, e)
    return bool(with_raw > with_empty and with_raw >= 0.3)


def correlation(a, b) -> float:
    """Pearson's correlation; 0 where either is flat, as the previous rule read it."""
    a, b = a - a.mean(), b - b.mean()
    scale = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / scale) if scale > 1e-6 else 0.0


def read_clip(bundle: Path, clip: Path) -> tuple:
    """{variant: [share per judged box]}, boxes the previous rule calls leaking, frames read."""
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.camera import iou
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream

    privatizer = Privatizer.load(bundle, output="sample", seed=0)
    stream = Stream(privatizer, open_source(str(clip), prefetch=False))
    truth, empty = scene_truth(clip)
    offline = TiledPeople(privatizer.pipeline.run_graph)
    meter = LeakMeter(clip_empty_scene(clip) if empty is None else empty,
                      offline=offline if truth is None else truth_boxes(truth, offline))
    shares, previous, frames = {}, 0, 0
    for result in stream:
        frames += 1
        found = meter.people(result.frame.index, result.frame.data)
        boxes = stream.preprocessor.last_boxes
        if len(found) and len(boxes):
            found = found[iou(found, boxes).max(1) < 0.3]
        raw, released = to_grey(result.frame.data), to_grey(result.output)
        pasted = pasted_mask(raw.shape, stream.preprocessor.last_windows)
        for box in found:
            if person_share(raw, released, meter.empty, box, pasted) is None:
                continue
            previous += previous_rule(raw, released, meter.empty, box, pasted)
            for name, release in variants(raw, released, meter.empty):
                release = np.where(pasted, released, release)
                shares.setdefault(name, []).append(person_share(raw, release, meter.empty, box, pasted))
    return shares, previous, frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True, help="a camera bundle (scripts/camera_results.py makes them)")
    parser.add_argument("--clip", required=True)
    args = parser.parse_args()
    shares, previous, frames = read_clip(Path(args.bundle), Path(args.clip))
    judged = len(shares.get("the pipeline's release", []))
    print(f"{Path(args.clip).name}: {frames} frames, {judged} judged boxes the pipeline did not cover; "
          f"the previous rule calls {previous} of them leaking")
    print(f"| release read | share p{' | p'.join(str(p) for p in PERCENTILES)} | boxes at {GHOST_SHARE} or more |")
    print("|---" * (len(PERCENTILES) + 2) + "|")
    for name, values in shares.items():
        values = np.asarray(values)
        cells = " | ".join(f"{v:.3f}" for v in np.percentile(values, PERCENTILES))
        print(f"| {name} | {cells} | {int((values >= GHOST_SHARE).sum())} of {len(values)} |")


if __name__ == "__main__":
    main()
