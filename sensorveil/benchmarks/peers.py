"""deface, the peer a camera privatizer is measured against: its CPU time per frame on the frames a benchmark
streams, so `sensorveil benchmark --versus deface` can print the pipeline's frames per CPU-second as a multiple
of deface's, measured on the same clip and machine a moment apart.

deface runs as its users run it (``deface CLIP -o OUT.mp4``, a process of its own) and its CPU time is the
child's user + system time (``os.wait4``). A process also starts, loads its model and opens its files, which a
benchmark's timed frames do not include (they come after the warm-up), so deface is run twice, on the first
``warmup`` frames and on ``warmup + frames``: the difference over ``frames`` is what one more frame costs it.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sensorveil.runtime.errors import BackendUnavailableError, InputError

PEERS = ("deface",)   # the tools `sensorveil benchmark --versus` can run


def deface_command() -> list:
    """The ``deface`` console script beside this interpreter, else on PATH."""
    script = Path(sys.executable).with_name("deface")
    found = str(script) if script.is_file() else shutil.which("deface")
    if found is None:
        raise BackendUnavailableError("--versus deface needs deface installed: pip install 'sensorveil[peers]' "
                                      "and pip install --no-deps 'deface>=1.5' (the README's peer comparison)")
    return [found]


def cut_clip(clip: Path, frames: "int | None", out: Path, always: bool = False) -> "tuple":
    """The first ``frames`` frames of ``clip`` as an MJPG .avi (or the clip itself when it has no more,
    unless ``always``): (path, frames in it)."""
    import cv2
    capture = cv2.VideoCapture(str(clip))
    if not capture.isOpened():
        raise InputError("cannot open {} as a video file; expected a clip deface can read".format(clip))
    total = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    if frames is None or (frames >= total and not always):
        capture.release()
        return clip, total
    fps = capture.get(cv2.CAP_PROP_FPS) or 25.0
    writer, written = None, 0
    while written < frames:
        ok, frame = capture.read()
        if not ok:
            break
        if writer is None:
            writer = cv2.VideoWriter(str(out), cv2.VideoWriter_fourcc(*"MJPG"), fps, (frame.shape[1], frame.shape[0]))
        writer.write(frame)
        written += 1
    capture.release()
    if writer is not None:
        writer.release()
    return out, written


def run_timed(argv: list, log: Path, cwd: "str | None" = None) -> dict:
    """Run one tool to completion: wall seconds, the child's own CPU seconds (user + system), its peak RSS.
    A tool that fails raises with the end of its output."""
    started = time.perf_counter()
    with open(str(log), "wb") as output:
        process = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT, cwd=cwd)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = status    # already reaped: Popen must not wait for it again
    wall = time.perf_counter() - started
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        tail = log.read_text(errors="replace")[-1500:]
        raise RuntimeError("{} ... failed (status {}); the end of its output ({}):\n{}".format(
            " ".join(argv[:4]), status, log, tail))
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_mb": usage.ru_maxrss / 1024}


def deface_cpu_per_frame(clip: "str | Path", frames: int, warmup: int = 10, command: "list | None" = None,
                         backend: "str | None" = None) -> dict:
    """deface's CPU ms for one more frame of ``clip``: runs on its first ``warmup`` and ``warmup + frames``
    frames, the difference over ``frames`` (start-up and model load cancel). ``command``: the deface to run
    (default ``deface_command()``); ``backend``: its ``--backend`` (default: deface's own choice, onnxruntime
    where it imports, else OpenCV's DNN module)."""
    clip = Path(clip)
    if not clip.is_file():
        raise InputError("--versus deface measures deface on the benchmark's --source; {} is not a video file "
                         "(a camera or depth source cannot be replayed to a second tool)".format(clip))
    command = list(command or deface_command()) + (["--backend", backend] if backend else [])
    with tempfile.TemporaryDirectory(prefix="sensorveil-deface-") as work:
        work = Path(work)
        runs = {}
        for name, count in (("start", warmup), ("whole", warmup + frames)):
            cut, got = cut_clip(clip, count, work / "{}.avi".format(name), always=True)
            runs[name] = dict(run_timed(command + [str(cut), "-o", str(work / "{}.mp4".format(name))],
                                        work / "{}.log".format(name)), frames=got)
    extra = runs["whole"]["frames"] - runs["start"]["frames"]
    if extra < 1:
        raise InputError("{} has {} frames: --versus deface needs more than the stream's {} warm-up frames".format(
            clip, runs["whole"]["frames"], warmup))
    per_frame = (runs["whole"]["cpu_s"] - runs["start"]["cpu_s"]) / extra
    return {"tool": "deface", "frames": extra, "cpu_ms_per_frame": 1e3 * per_frame,
            "startup_cpu_s": runs["start"]["cpu_s"],
            "command": "deface CLIP -o OUT.mp4" + (" --backend " + backend if backend else "")}


def times_peer(pipeline_cpu_ms: float, peer: dict) -> float:
    """The pipeline's frames per CPU-second as a multiple of the peer's."""
    return peer["cpu_ms_per_frame"] / pipeline_cpu_ms


def versus_line(row: dict, peer: dict) -> str:
    ms = row["stream_cpu_ms_per_frame"]
    return ("{} {}: {:.1f}x {}'s frames per CPU-second ({:.1f} against {:.1f} CPU ms a frame; {} measured on {} "
            "of the same frames, re-encoded as MJPG, start-up taken out)").format(
        row["format"], row["precision"], times_peer(ms, peer), peer["tool"], ms, peer["cpu_ms_per_frame"],
        peer["tool"], peer["frames"])
