"""Fuzz the camera pipeline's fail-closed promise: mutate a camera bundle's camera and draw fields, and the
sequence of frames a stream sees (dtypes, shapes, sizes that change, empty and odd frames), and check each case
ends one of two ways:

* refused: ``Privatizer.load`` raises the runtime's own error (a SensorveilError), or
* streamed: the stream ends by itself (odd frames counted bad, never an exception out of it), and no released
  frame shows the camera: on a sequence shorter than the quiet scene's horizon every released pixel is the
  neutral scene or a substitute, so a frame with more than RAW_SHARE of its pixels equal to the raw frame's
  (all channels) released the camera as it is.

Anything else is a finding, printed with the mutation that caused it; exit 1 when there is any.

    python scripts/fuzz_camera.py --cases 200 --seed 0 [--bundle DIR] [--clip ../shared/media/walkway.avi]

Without --bundle it trains a small PASS camera bundle on the clip first (rendered bank, motion detector).
The mutations are seeded: the same seed replays the same cases.
"""
import argparse
import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from sensorveil_lab.bundle_fuzz import DELETE, HOSTILE_VALUES, leaf_paths, set_path

ROOT = Path(__file__).resolve().parents[1]

RAW_SHARE = 0.05          # more of a released frame than this equal to the raw frame: the camera went out
SEQUENCE = 40             # frames a case streams: under the quiet scene's horizon, so none may show the camera
FRAME_MUTATIONS = ("float32", "bool", "object", "width-alternates", "empty", "five-channels", "grey", "tiny",
                   "larger", "constant", "uint16")


def camera_frames(clip: str, count: int) -> list:
    import cv2
    capture = cv2.VideoCapture(clip)
    frames = []
    while len(frames) < count:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    if not frames:
        raise SystemExit(f"no frames read from {clip}")
    return frames


def mutate_frames(frames: list, how: str, rng) -> list:
    """A copy of the sequence with one kind of odd frame at a random place (or, for changing sizes, throughout)."""
    frames = [f.copy() for f in frames]
    k = int(rng.integers(len(frames)))
    if how == "width-alternates":
        return [f[:, : f.shape[1] - (i % 2)] for i, f in enumerate(frames)]
    odd = {"float32": lambda f: f.astype(np.float32), "bool": lambda f: f > 127,
           "object": lambda f: f.astype(object), "empty": lambda f: f[:, :0], "five-channels":
           lambda f: np.concatenate([f, f[..., :2]], axis=2), "grey": lambda f: f[..., 0],
           "tiny": lambda f: f[:3, :3], "larger": lambda f: np.pad(f, ((0, 40), (0, 40), (0, 0))),
           "constant": lambda f: np.full_like(f, 200), "uint16": lambda f: f.astype(np.uint16) * 256}[how]
    frames[k] = odd(frames[k])
    return frames


def mutate_camera_fields(manifest: dict, rng) -> tuple:
    """A copy with one camera or draw field replaced by a hostile value or deleted; (copy, description)."""
    paths = [path for path in leaf_paths(manifest) if path and (path[0] == "camera" or (
        path[0] == "pipeline" and len(path) > 2 and path[2] in ("cut_out", "bank_source", "sequence", "condition",
                                                                 "output_default", "bank_colour")))]
    path = paths[rng.integers(len(paths))]
    value = DELETE if rng.random() < 0.2 else HOSTILE_VALUES[rng.integers(len(HOSTILE_VALUES))]
    changed = copy.deepcopy(manifest)
    set_path(changed, path, value)
    return changed, "manifest {} = {}".format(".".join(map(str, path)), "<deleted>" if value is DELETE else repr(value))


def raw_share(raw: np.ndarray, out: np.ndarray) -> float:
    """The share of a released frame's pixels equal to the raw frame's in every channel (0 for another shape)."""
    if out.shape != raw.shape:
        return 0.0
    return float((out == raw).reshape(raw.shape[0], raw.shape[1], -1).all(-1).mean())


def stream_outcome(bundle: Path, frames: list) -> tuple:
    """("refused", why) / ("streamed", None) / ("finding", what) for one bundle over one frame sequence."""
    from sensorveil.runtime.errors import SensorveilError
    from sensorveil.runtime.sources import Frame, Source
    from sensorveil.runtime.stream import Stream, load_for_stream
    try:
        privatizer = load_for_stream(bundle)
    except SensorveilError as error:
        return "refused", str(error)[:160]
    except Exception as error:     # anything but the runtime's own error is a finding
        return "finding", "load: {}: {}".format(type(error).__name__, str(error)[:200])

    class Listed(Source):
        def open(self):
            pass

        def read(self):
            if self._count >= len(frames):
                return None
            index = self._next_index()
            return Frame(frames[index], index / 25.0, index, "camera")
    source = Listed("fuzz")
    source.open()
    try:
        for result in Stream(privatizer, source):
            if raw_share(result.frame.data, np.asarray(result.output)) > RAW_SHARE:
                return "finding", "frame {} released the camera's pixels".format(result.frame.index)
    except Exception as error:
        return "finding", "stream: {}: {}".format(type(error).__name__, str(error)[:200])
    return "streamed", None


def one_case(seed_bundle: Path, frames: list, work: Path, rng) -> dict:
    target = work / "case"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(seed_bundle, target)
    if rng.random() < 0.5:
        manifest = json.loads((target / "manifest.json").read_text())
        changed, description = mutate_camera_fields(manifest, rng)
        (target / "manifest.json").write_text(json.dumps(changed))
    else:
        how = FRAME_MUTATIONS[rng.integers(len(FRAME_MUTATIONS))]
        frames, description = mutate_frames(frames, how, rng), "frames: " + how
    kind, detail = stream_outcome(target, frames)
    return {"mutation": description, "outcome": kind, "detail": detail}


def seed_bundle(clip: str, work: Path) -> Path:
    """A small PASS camera bundle (rendered bank, motion detector), trained on every 8th frame of the clip."""
    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    run = train_run("pass", "walkway", data_path=clip, out=work / "run", epochs=1, attacker_epochs=1,
                    dataset_options={"stride": 8},
                    settings={"embedding_dim": 32, "progress": False, "condition": "direction"})
    return Path(export_run(run, "onnx", work / "seed", person_detector="motion"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bundle", default=None, help="a camera bundle to fuzz (default: train a small one)")
    parser.add_argument("--clip", default=str(ROOT.parent / "shared" / "media" / "walkway.avi"))
    parser.add_argument("--json", default=None, help="also write every case's outcome here")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    frames = camera_frames(args.clip, SEQUENCE)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        bundle = Path(args.bundle) if args.bundle else seed_bundle(args.clip, work)
        for index in range(args.cases):
            results.append(one_case(bundle, frames, work, rng))
            if (index + 1) % 25 == 0:
                print("fuzz camera: {} of {} cases".format(index + 1, args.cases), flush=True)
    counts = {kind: sum(r["outcome"] == kind for r in results) for kind in ("refused", "streamed", "finding")}
    print("fuzz camera: {cases} cases, {refused} refused, {streamed} streamed and checked, {finding} findings".format(
        cases=len(results), **counts))
    for r in results:
        if r["outcome"] == "finding":
            print("  FINDING: {} -> {}".format(r["mutation"], r["detail"]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 1 if counts["finding"] else 0


if __name__ == "__main__":
    sys.exit(main())
