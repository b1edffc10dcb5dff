"""The peer beside us: `deface` and `sensorveil run` on the same real camera clip, cost per frame.

    python scripts/compare_peers.py [--clip ../shared/media/walkway.avi] [--bundle BUNDLE] [--frames N]
                                    [--out peers-out] [--json docs/peers.json] [--markdown docs/peers.md]

Both tools run as the user would run them, as separate processes, one after the other, on the same
file (the first --frames frames of the clip, re-encoded losslessly enough once, so both decode the same
bytes), and both write an mp4 of what they produce:

    deface CLIP -o OUT.mp4                                   (CenterFace in onnxruntime, blurs faces)
    sensorveil run BUNDLE --source CLIP --sink OUT.mp4       (the 180x180 depth PR-GAN bundle through
                                                              the camera demonstration path)

Per tool: wall-clock seconds, frames per second over the whole run (process start and model load
included, as a user experiences it), and CPU seconds per frame (user + system of the child process,
from os.wait4: it counts every core the tool uses and is less sensitive to a busy machine than FPS).

What is compared is cost per frame only. deface blurs the faces its detector finds and leaves the rest
of the frame as it was; a sensorveil bundle privatizes a declared attribute of what it was trained on
(here: identity in 180x180 overhead depth patches), and a camera frame reaches it through the
demonstration path (grayscale, centre crop, resize). Neither tool's privacy is measured here.

Without --bundle, a PR-GAN bundle on synthetic depth (180x180) is trained for one epoch and exported to
ONNX: its privacy is irrelevant to the cost, its architecture and input size are those of the depth
bundle. Every figure in the JSON and the Markdown page comes from this run; none is typed by hand.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from sensorveil.benchmarks.peers import cut_clip, deface_command, run_timed
from sensorveil_lab.depth_bundle import depth_bundle
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", REPO.parent / "shared"))
DEFAULT_CLIP = SHARED / "media" / "walkway.avi"
STATEMENTS = {
    False: ("deface blurs the faces its detector finds; sensorveil privatizes an attribute it was trained to "
            "hide (here a depth bundle fed camera frames through the demonstration path). The tools do different "
            "jobs: this table compares what each costs per frame on the same clip, not their privacy."),
    True: ("deface blurs the faces its detector finds; sensorveil's camera bundle finds the people (its learned "
           "detector and motion), privatizes each person's crop and releases the composited frame. The tools do "
           "different jobs: this table compares what each costs per frame on the same clip, not their privacy."),
}


def frames_in_video(path: Path) -> int:
    import cv2
    capture = cv2.VideoCapture(str(path))
    count = 0
    while capture.grab():   # decoded, not the container's header: what was really written
        count += 1
    capture.release()
    return count


def shown(argv: list[str], out: Path) -> str:
    """The command as a reader would type it: no interpreter path, files relative to the working folder."""
    text = " ".join(str(a) for a in argv).replace(sys.executable, "python").replace(f"{out}/", "")
    return text.replace(str(Path(sys.executable).with_name("deface")), "deface")


def measure(name: str, argv: list[str], video: Path, frames: int, out: Path) -> dict:
    figures = run_timed(argv, out / f"{name}.log", cwd=str(REPO))
    written = frames_in_video(video)
    return {"tool": name, "command": shown(argv, out), "frames_in": frames, "frames_written": written,
            **figures, "fps": frames / figures["wall_s"], "cpu_s_per_frame": figures["cpu_s"] / frames,
            "output": str(video)}


def bundle_facts(bundle: Path) -> dict:
    manifest = json.loads((bundle / "manifest.json").read_text())
    mechanism = manifest["mechanism"]
    return {"path": str(bundle), "mechanism": mechanism.get("name"), "useful": mechanism.get("useful"),
            "private": mechanism.get("private"), "input_shape": manifest["input"]["sample_shape"],
            "camera": manifest.get("camera", {}).get("detector")}


def as_text(value) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


def format_markdown(result: dict) -> str:
    rows = ["| tool | what it does to a frame | frames | wall s | FPS | CPU s / frame | peak RSS MB |",
            "|---|---|---:|---:|---:|---:|---:|"]
    what = {"deface": "blurs detected faces (CenterFace, onnxruntime)",
            "sensorveil": f"privatizes '{as_text(result['bundle']['private'])}' "
                          f"({result['bundle']['mechanism']} bundle, {result['bundle']['input_shape']} input)"}
    for row in result["rows"]:
        rows.append(f"| {row['tool']} | {what[row['tool']]} | {row['frames_in']} | {row['wall_s']:.1f} | "
                    f"{row['fps']:.1f} | {row['cpu_s_per_frame']:.4f} | {row['max_rss_mb']:.0f} |")
    ratio = result["rows"][0]["cpu_s_per_frame"] / result["rows"][1]["cpu_s_per_frame"]
    written = ", ".join(f"{row['tool']} {row['frames_written']}" for row in result["rows"])
    return "\n".join([
        "# sensorveil beside deface: cost per frame on the same camera clip", "",
        page_header(recorded(result)), "",
        f"Clip: `{Path(result['clip']).name}`, {result['frames']} frames of {result['frame_size']}; frames "
        f"written to each tool's mp4: {written}.", "",
        *rows, "",
        f"deface spends {ratio:.1f}x the CPU time per frame that sensorveil does on this clip.", "",
        result.get("statement", STATEMENTS[False]), "",
        "FPS covers each whole process (start, model load, decode, the work, encoding the mp4), as a user runs it. "
        "CPU seconds per frame add every core the tool used (user + system) and move less than FPS when the "
        "machine is busy. The commands, one after the other:", "",
        *[f"    {row['command']}" for row in result["rows"]], ""])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clip", type=Path, default=DEFAULT_CLIP, help="a real camera clip (default walkway.avi)")
    parser.add_argument("--bundle", type=Path, default=None, help="a depth bundle (default: one trained here)")
    parser.add_argument("--frames", type=int, default=None, help="the first N frames only (default: all)")
    parser.add_argument("--out", type=Path, default=Path("peers-out"), help="working folder: videos and logs")
    parser.add_argument("--json", type=Path, default=REPO / "docs" / "peers.json")
    parser.add_argument("--markdown", type=Path, default=REPO / "docs" / "peers.md")
    parser.add_argument("--allow-dirty", action="store_true", help="measure from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    require_clean(args.allow_dirty)
    record = provenance([__file__] + list(sys.argv[1:] if argv is None else argv), args.allow_dirty)
    if not args.clip.is_file():
        raise SystemExit(f"{args.clip} not found: expected the shared camera clip (set SENSORVEIL_SHARED or --clip)")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    deface = deface_command()
    bundle = (args.bundle or depth_bundle(out)).resolve()
    clip, frames = cut_clip(args.clip.resolve(), args.frames, out / "clip.avi")
    import cv2
    capture = cv2.VideoCapture(str(clip))
    size = f"{int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))}x{int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))}"
    capture.release()
    print(f"clip {clip} ({frames} frames, {size}); bundle {bundle}", flush=True)
    rows = []
    for name, command, video in (
            ("deface", deface + [str(clip), "-o", str(out / "deface.mp4")], out / "deface.mp4"),
            ("sensorveil", [sys.executable, "-m", "sensorveil", "run", str(bundle), "--source", str(clip),
                            "--sink", str(out / "sensorveil.mp4"), "--json", str(out / "sensorveil-run.json")],
             out / "sensorveil.mp4")):
        print(f"running {name} ...", flush=True)
        rows.append(measure(name, command, video, frames, out))
        print(f"  {rows[-1]['fps']:.1f} FPS, {rows[-1]['cpu_s_per_frame']:.4f} CPU s/frame", flush=True)
    command = "python scripts/compare_peers.py" + (f" --frames {args.frames}" if args.frames else "") + \
        (" --bundle BUNDLE (the one depth_bundle.py builds; see bundle in the JSON)" if args.bundle else "")
    result = {"command": command, "date": time.strftime("%Y-%m-%d"),
              "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical cores",
              "clip": str(args.clip), "frames": frames, "frame_size": size, "bundle": bundle_facts(bundle),
              "rows": rows, "statement": STATEMENTS[bool(bundle_facts(bundle)["camera"])],
              "provenance": record}
    result = portable(result, shared=SHARED)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    args.markdown.write_text(format_markdown(result))
    print(format_markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
