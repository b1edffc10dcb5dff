"""What every verb of the `sensorveil` console script shares: argument types, usage errors, printing
figures and writing JSON, and the stream report the run and preview verbs print.
Runs on the boards' Python (3.6) like the runtime verbs it serves: no annotations import here.
"""
import argparse
import json
import math
import sys
from pathlib import Path


class UsageError(ValueError):
    """A wrong combination of arguments: one line on stderr and exit code 2, like argparse's own."""


def write_json(data: dict, path) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")
        print(f"wrote {path}")


def print_mapping(title: str, data: dict) -> None:
    print(title)
    for key, value in data.items():
        if isinstance(value, float):
            value = f"{value:.4f}"
        if not isinstance(value, (dict, list)):
            print(f"  {key:28s} {value}")


def positive_int(text: str) -> int:
    """argparse type: a count of 1 or more (a usage error, exit 2, otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def share(text: str) -> float:
    """argparse type: a share of frames, a finite number from 0 to 1 (NaN would compare false and pass
    every frame as good, so it is a usage error like any other)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text}")
    return value


def parse_settings(pairs) -> dict:
    """--set KEY=VALUE ... -> {KEY: "VALUE"}; the mechanism converts each to its setting's type."""
    settings = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--set takes KEY=VALUE, got {pair!r}")
        settings[key.strip()] = value.strip()
    return settings


FRACTION_KEYS = ("model_ms_p50", "runtime_added_ms_p50", "units_ms_p50", "runtime_added_fraction", "units_fraction")


def print_stream_report(report: dict) -> None:
    print_mapping(f"stream {report['source']}", {key: value for key, value in report.items()
                                                  if key not in FRACTION_KEYS})
    for stage, figures in report.get("stages_ms", {}).items():
        print(
            f"  {stage + '_ms (mean/p50/p95)':28s} {figures['mean']:.3f} / {figures['p50']:.3f} / {figures['p95']:.3f}"
        )
    for line in explain_overhead(report):
        print("  " + line)
    for error in report.get("errors", []):
        print(f"  bad frame: {error}")
    if report.get("frames_missing"):
        print(
            f"sensorveil: warning: the source announced {report['frames_announced']} frames and ended "
            f"{report['frames_missing']} short of that (a damaged or truncated file?)",
            file=sys.stderr,
        )


def explain_overhead(report: dict) -> "list[str]":
    """The runtime's added time per frame in words: the JSON's *_fraction keys are ratios to the
    model's own time (8.9 means nine times the model's time, not 8.9 %)."""
    if report.get("runtime_added_fraction") is None:
        return []
    model = report["model_ms_p50"]
    return [
        f"model (backend) per frame, p50: {model:.3f} ms",
        f"runtime added per frame, p50:   {report['runtime_added_ms_p50']:.3f} ms = "
        f"{report['runtime_added_fraction']:.2f}x the model's time (runtime_added_fraction: preprocess + "
        "postprocess, i.e. frame-to-sample crop/resize, validation and unit mapping)",
        f"  of which the Privatizer's own: {report['units_ms_p50']:.3f} ms = {report['units_fraction']:.2f}x "
        "(units_fraction: validation and sensor<->model units, what a caller handing it samples pays)",
    ] + (
        [
            "  preprocess ran in the read-ahead thread, beside the model: it costs CPU, not the frame rate, "
            "while it is the faster side"
        ]
        if report.get("prepared_ahead")
        else []
    )


def progress_for(source, frames):
    """A progress line on stderr: frames done of the file's length (or of --frames)."""
    from sensorveil.runtime.progress import Progress, expected_frames

    total = expected_frames(source)
    if frames is not None:
        total = min(total, frames) if total else frames
    return Progress(total)


SCENE_STILL_HELP = ("camera bundles that release a scene: a picture (PNG, JPEG) of the empty place at the camera's "
                    "size, shown where the camera has not been quiet long enough yet (default: the neutral scene, a "
                    "grey grain); "
                    "whatever it shows is released, so it must hold nobody")


def scene_still_from(args):
    """--scene-still IMAGE read as the camera's frames come (BGR uint8), or None."""
    if getattr(args, "scene_still", None) is None:
        return None
    from sensorveil.runtime.camera.scene import read_scene_still
    from sensorveil.runtime.regular import check_regular
    # a FIFO or a device would hold the image reader until someone writes to it: refused before it is opened
    check_regular(args.scene_still, "a picture (PNG, JPEG) of the empty place, a regular file",
                  name="--scene-still {}".format(args.scene_still))
    return read_scene_still(args.scene_still)
