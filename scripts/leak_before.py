"""One leaking box of the camera audit, read again: the leak meter's reading of the release at that frame, of the
neutral scene at the same box, and of the release of an earlier frame, chosen by the user as one from before the
person came.

A box the meter calls leaking keeps GHOST_SHARE or more of the raw person's detail (sensorveil.benchmarks.leak_meter).
Where the judged pixels of the release are the same bytes as an earlier release's, made before the person was in
view, they cannot hold that person: the reading is the meter's on the scene, not a leak of them. The script prints
the readings, how many pixels of the box's region (as the meter grows it, pastes left out) differ between the two
releases, and the raw frames' difference there, so the reader can check that the earlier frame is one without the
person. It judges nothing itself.

    python scripts/leak_before.py --bundle BUNDLE --clip ../shared/media/walkway.avi --frame 734 \\
        --box 456,38,11,20 --before 660
"""
import argparse
import sys

import numpy as np


def releases(privatizer, clip: str, frames: set) -> dict:
    """{index: (raw, released, the pipeline's windows)} for ``frames``, released as the camera audit releases them."""
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream

    stream = Stream(privatizer, open_source(clip, reconnect=False, prefetch=False))
    kept = {}
    for result in stream:
        if result.frame.index in frames:
            kept[result.frame.index] = (result.frame.data.copy(), result.output.copy(),
                                        np.array(stream.preprocessor.last_windows))
        if len(kept) == len(frames):
            break
    return kept


def readings(bundle: str, clip: str, frame: int, box, before: int, seed: int = 0) -> dict:
    from sensorveil.benchmarks import leak_meter as meter
    from sensorveil.benchmarks.clip_audit import OncePerFrame, read_clip
    from sensorveil.runtime.camera.scene import starting_scene
    from sensorveil.runtime.stream import load_for_stream

    privatizer = load_for_stream(bundle, seed=seed)     # one load: the audit's reference graph and its release
    # the audit's empty scene, as clip_audit makes it
    empty = meter.empty_scene(read_clip(clip), OncePerFrame(meter.TiledPeople(privatizer.pipeline.run_graph)))
    kept = releases(privatizer, clip, {frame, before})
    raw, released, windows = meter.to_grey(kept[frame][0]), meter.to_grey(kept[frame][1]), kept[frame][2]
    earlier_raw, earlier = meter.to_grey(kept[before][0]), meter.to_grey(kept[before][1])
    pasted = meter.pasted_mask(raw.shape, windows)
    rows, cols, _, judged = meter.person_pixels(raw, empty, box, pasted)

    def share(release):
        return meter.person_share(raw, release, empty, box, pasted)

    def there(values):     # the judged pixels of the box's region
        return values[rows, cols][judged]

    return {"release": share(released),
            "neutral scene": share(meter.to_grey(starting_scene(kept[frame][0].shape, None))),
            "earlier release": share(earlier),
            "pixels of the box's region": int(judged.sum()),
            "of them, where the two releases differ": int(there(released != earlier).sum()),
            "raw frames' mean grey difference there": float(there(np.abs(raw.astype(float) - earlier_raw)).mean())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--clip", required=True)
    parser.add_argument("--frame", type=int, required=True, help="the leaking box's frame (the audit's leaks list)")
    parser.add_argument("--box", required=True, help="x,y,w,h as the audit lists it")
    parser.add_argument("--before", type=int, required=True, help="an earlier frame, from before the person came")
    parser.add_argument("--seed", type=int, default=0, help="the draws' seed, as the audit's --seed")
    args = parser.parse_args(argv)
    if args.before >= args.frame:
        parser.error(f"--before {args.before}: expected a frame before --frame {args.frame}")
    box = np.array([int(v) for v in args.box.split(",")])
    for name, value in readings(args.bundle, args.clip, args.frame, box, args.before, args.seed).items():
        print(f"{name}: {value:.3f}" if isinstance(value, float) else f"{name}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
