"""Where the camera pipeline's CPU time goes, step by step, against the speed goal (10x deface's frames per
CPU-second).

A camera bundle runs over a clip as `sensorveil run` runs it (Stream, the bundle's backend), but one frame at a
time with nothing reading ahead, so each step's CPU time (time.process_time: every thread of the process,
onnxruntime's pool included) lands on that step alone. The steps are the pipeline's own methods, timed where
the pipeline calls them; "the rest" is what the loop spends between them (validation, crop geometry, the
tracker's bookkeeping). deface is timed in the same run on the same frames, its start-up taken out
(sensorveil.benchmarks.peers.deface_cpu_per_frame), as `sensorveil benchmark --versus deface` and
docs/camera_speed.md time it, so the goal line divides like by like (docs/peers.md's figure is a whole process,
start-up included: another question). Read the figures as shares: CPU time moves with the machine's load.

    python scripts/pipeline_cost.py --bundle bundles/camera/pass-walkway --clip ../shared/media/walkway.avi \\
        --out docs/pipeline_cost.md
"""
import argparse
import time
from pathlib import Path

from sensorveil_lab.provenance import page_header, provenance, require_clean

GOAL_TIMES_DEFACE = 10


def timed(function, spent: dict, step: str):
    """``function`` that adds its CPU time to ``spent[step]``."""
    def run(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[step] += time.process_time() - start
    return run


def instrument(stream, spent: dict) -> None:
    """Time the pipeline's steps on this stream's camera pre-processor (made by its first frame)."""
    crops = stream.preprocessor
    detector = crops.detector
    steps = {"decode the frame": (stream, "_read"),
             "motion detector (MOG2 blobs)": (getattr(detector, "motion", detector), "detect"),
             "tracker and walking direction": (crops.tracker, "update"),
             "quiet scene (what is released around people)": (crops, "update_scene"),
             "paste substitutes into the scene": (crops, "restore")}
    if hasattr(detector, "find"):
        steps["learned person graph (amortized)"] = (detector, "find")
    for step, (owner, name) in steps.items():
        spent[step] = 0.0
        setattr(owner, name, timed(getattr(owner, name), spent, step))
    # the model and its draw: _privatize less the paste inside it (timed above)
    spent["privatize the crops (model + draw)"] = 0.0
    stream._privatize = timed(stream._privatize, spent, "privatize the crops (model + draw)")


def measure(bundle: Path, clip: Path, warmup: int, every: "int | None" = None,
            motion_scale: "float | None" = None) -> dict:
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream, load_for_stream

    privatizer = load_for_stream(bundle)
    spent = {}
    with open_source(str(clip), prefetch=False) as source:
        stream = Stream(privatizer, source, prepare_ahead=False)
        frames = iter(stream)
        next(frames)              # builds the pre-processor, whose detector settings may be overridden
        override(stream.preprocessor.detector, every, motion_scale)
        if motion_scale:          # a new background model learns its own warm-up frames before timing starts
            warmup = max(warmup, stream.preprocessor.detector.motion.warmup + 1)
        for _ in range(warmup - 1):   # the first frames warm the backend and teach the background model
            next(frames)
        instrument(stream, spent)
        counted, start = 0, time.process_time()
        for _ in frames:
            counted += 1
        total = time.process_time() - start
    spent["privatize the crops (model + draw)"] -= spent["paste substitutes into the scene"]
    spent["the rest of the loop"] = total - sum(spent.values())
    return {"frames": counted, "cpu_ms": {step: 1e3 * s / counted for step, s in spent.items()},
            "total_cpu_ms": 1e3 * total / counted, "backend": privatizer.backend_name}


def override(detector, every: "int | None", motion_scale: "float | None") -> None:
    """The learned detector's graph step and a new motion detector at ``motion_scale``, where given: settings no
    manifest field carries (motion's scale) or other than the bundle's, to time what they would cost. The
    release is not audited here: the recall of such settings is scripts/motion_scale.py's."""
    from sensorveil.runtime.camera import MotionPeopleDetector
    if (every or motion_scale) and not hasattr(detector, "every"):
        raise SystemExit(f"--every and --motion-scale need a bundle with the learned detector; this one has "
                         f"{type(detector).__name__}")
    if every:
        detector.every = every
    if motion_scale:
        detector.motion = MotionPeopleDetector(scale=motion_scale)


def page(result: dict, record: dict, deface: "dict | None") -> str:
    total = result["total_cpu_ms"]
    lines = ["# Where the camera pipeline's CPU time goes", "", page_header(record), "",
             f"{result['frames']} frames of `{result['clip']}` through `{result['bundle']}` "
             f"({result['backend']}{result.get('settings', '')}), one frame at a time; CPU ms per frame, every "
             f"thread of the process.", "",
             "| step | CPU ms per frame | share |", "|---|---|---|"]
    for step, ms in sorted(result["cpu_ms"].items(), key=lambda item: -item[1]):
        lines.append(f"| {step} | {ms:.1f} | {100 * ms / total:.0f}% |")
    lines.append(f"| **whole pipeline** | **{total:.1f}** | {1000 / total:.1f} frames per CPU-second |")
    if deface is None:
        return "\n".join(lines + ["", "deface was not timed (--no-deface): no goal line."]) + "\n"
    deface_ms = deface["cpu_ms_per_frame"]
    goal = deface_ms / GOAL_TIMES_DEFACE
    lines += ["", f"Goal: {GOAL_TIMES_DEFACE}x deface's frames per CPU-second. deface (`{deface['command']}`) "
              f"spends {deface_ms:.1f} CPU ms a frame on the same {deface['frames']} frames, timed in this run "
              f"with its start-up taken out, as docs/camera_speed.md times it; so the goal is {goal:.1f} CPU ms a "
              f"frame, and the pipeline spends {total:.1f} ({deface_ms / total:.1f}x deface's frames per "
              f"CPU-second).", "", budget_line(result["cpu_ms"], total, goal, deface_ms)]
    return "\n".join(lines) + "\n"


def settings_text(every: "int | None", motion_scale: "float | None") -> str:
    """The overridden settings, as the page names them."""
    parts = ([f"learned graph every {every} frames"] if every else []) + (
        [f"motion at {motion_scale}"] if motion_scale else [])
    return "".join(f"; {part} (timing only)" for part in parts)


FINDING_PEOPLE = ("learned person graph (amortized)", "motion detector (MOG2 blobs)")


def budget_line(cpu_ms: dict, total: float, goal: float, deface_ms: float) -> str:
    """What the goal leaves for finding people once every other step has had its time."""
    finding = sum(cpu_ms.get(step, 0.0) for step in FINDING_PEOPLE)
    rest = total - finding
    return (f"Finding the people (the learned graph and motion) costs {finding:.1f} CPU ms a frame, every other step "
            f"{rest:.1f}: with people found for nothing the pipeline would spend {rest:.1f} "
            f"({deface_ms / rest:.1f}x deface's), and the goal leaves {max(goal - rest, 0.0):.1f} ms a frame for "
            f"finding them.")


def main() -> None:
    from sensorveil.benchmarks.peers import deface_cpu_per_frame
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True, help="a camera bundle (cut-out paste)")
    parser.add_argument("--clip", required=True)
    parser.add_argument("--warmup", type=int, default=10, help="frames run before timing starts")
    parser.add_argument("--out", help="write the page here (markdown)")
    parser.add_argument("--allow-dirty", action="store_true")
    parser.add_argument("--every", type=int, help="time the learned graph every N frames instead of the bundle's")
    parser.add_argument("--motion-scale", type=float, help="time motion at this scale instead of 0.5")
    parser.add_argument("--no-deface", action="store_true", help="leave deface untimed (no goal line)")
    args = parser.parse_args()
    if args.out:
        require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    result = measure(Path(args.bundle), Path(args.clip), args.warmup, args.every, args.motion_scale)
    result.update(bundle=args.bundle, clip=args.clip, settings=settings_text(args.every, args.motion_scale))
    # deface on the frames the pipeline was timed on (after the warm-up)
    deface = None if args.no_deface else deface_cpu_per_frame(Path(args.clip), result["frames"], warmup=args.warmup)
    text = page(result, record, deface)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
