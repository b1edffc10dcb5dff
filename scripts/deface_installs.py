"""deface's CPU time per frame as each way of installing it runs: the reference of the camera speed goal.

The camera pipeline aims at 10x deface's frames per CPU-second; deface 1.5.0 was quoted at 0.165
CPU-s a frame on this machine. deface picks its model runner itself: onnxruntime where it imports (a venv
that also holds sensorveil has it), else OpenCV's DNN module (a plain ``pip install deface`` has only
OpenCV), and ``--backend`` forces one. This script measures each given deface executable with each given
backend exactly as ``sensorveil benchmark --versus deface`` measures it (sensorveil.benchmarks.peers: runs
on the clip's first ``--warmup`` frames and on ``--warmup + --frames``, the difference per extra frame, so
start-up cancels), one after the other, and prints a Markdown table. The figures in
docs/decisions/0012-speed-goal-reference.md:

    python -m venv /tmp/deface-plain && /tmp/deface-plain/bin/pip install deface==1.5.0
    python scripts/deface_installs.py --clip ../shared/media/walkway.avi --frames 300 \\
        --deface "$(dirname "$(command -v python)")/deface" /tmp/deface-plain/bin/deface --backends auto opencv onnxrt
"""
import argparse
from pathlib import Path

from sensorveil.benchmarks.peers import deface_cpu_per_frame
from sensorveil_lab.provenance import page_header, provenance

ROOT = Path(__file__).resolve().parents[1]

BACKENDS = ("auto", "opencv", "onnxrt")


def deface_runners(executable: str) -> str:
    """What the deface beside ``executable`` can run its model with: onnxruntime, when its interpreter
    imports it, and always OpenCV."""
    import subprocess
    python = Path(executable).with_name("python")
    found = subprocess.run([str(python), "-c", "import onnxruntime"], capture_output=True).returncode == 0
    return "onnxruntime and OpenCV" if found else "OpenCV only"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", required=True)
    parser.add_argument("--frames", type=int, default=300, help="timed frames after the warm-up")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--deface", nargs="+", required=True, help="deface executables (one per install)")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    args = parser.parse_args()
    print(page_header(provenance(allow_dirty=True)) + "\n")
    print("| deface install | runners it has | --backend | CPU ms a frame | start-up CPU s |")
    print("|---|---|---|---:|---:|")
    for executable in args.deface:
        runners = deface_runners(executable)
        for backend in args.backends:
            if backend == "onnxrt" and runners == "OpenCV only":
                continue
            row = deface_cpu_per_frame(args.clip, args.frames, args.warmup, command=[executable],
                                       backend=None if backend == "auto" else backend)
            print("| {} | {} | {} | {:.1f} | {:.1f} |".format(executable, runners, backend, row["cpu_ms_per_frame"],
                                                             row["startup_cpu_s"]), flush=True)
    print("\n{} timed frames of {} after {} warm-up frames, each install and backend once.".format(
        args.frames, Path(args.clip).name, args.warmup))


if __name__ == "__main__":
    main()
