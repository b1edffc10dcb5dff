#!/usr/bin/env python
"""The runtime on each board's own software, emulated: one row per board in docs/devices.md.

    python scripts/device_matrix.py                        # every board that can be emulated here
    python scripts/device_matrix.py --boards rpi5-bookworm # the arm64 case alone (what .ci/run runs)

Each board's userland is built once into a cached folder (--cache, default ~/.cache/sensorveil-matrix)
from Debian's packages (debootstrap) or the Python the board runs, with PyPI's wheels for that
platform. The checkout is installed there as the board's set-up script installs it, a PR-GAN and a
PASS bundle (exported here from short digits runs) are loaded and privatize the same 24 samples,
and what they emit is compared with this machine's onnxruntime output; scripts/device_benchmark.sh
then runs there unchanged. Boards:

* rpi5-bookworm: Raspberry Pi OS Bookworm's userland (Debian bookworm arm64, Python 3.11) booted in a
  full-system emulator (qemu-system-aarch64, Debian's arm64 kernel, the rootfs as its initramfs), so
  onnxruntime and LiteRT probe an ARM CPU. (Under qemu-user they segfault: their CPU probing reads
  the x86 host's /proc and /sys.) Installs with sensorveil/devices/setup/rpi5-cpu.sh, pip reading a
  folder of PyPI's aarch64 wheels (PIP_NO_INDEX, PIP_FIND_LINKS): the emulated board has no network.
* ncs2-era: Python 3.7 with OpenVINO 2022.3 (the last release with the MYRIAD plugin; its API lives in
  openvino.runtime), on this x86 CPU: the MYRIAD plugin needs the stick, so the CPU plugin runs it.
* coral-mendel: Mendel Linux (Debian buster arm64, Python 3.7), when a mirror here serves buster; else its row says why.
* jetson-floor: Python 3.6 with numpy 1.19 and onnxruntime 1.10 (JetPack 4.6's Python; TensorRT 8.2
  needs the Jetson's GPU and NVIDIA's L4T packages, which no registry here serves).

FPS figures under emulation say only that the board's code runs, never how fast the board is.
Needs: debootstrap, qemu-system-arm, cpio (Debian packages) for rpi5-bookworm; pyenv's 3.6 and 3.7 for
the others. A board whose tools are missing gets a row that says what is missing.
"""
from __future__ import annotations

import argparse
import base64
import glob
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from sensorveil_lab.arm64_board import (
    BOARD_INIT,
    DEBIAN_MIRROR,
    arm64_rootfs,
    arm64_wheels,
    boot_arm64,
    checkout_files,
    initramfs,
    marked,
    tools_missing,
)
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
PARITY = ROOT / "scripts" / "board_parity.py"
BUSTER_MIRRORS = (DEBIAN_MIRROR, "http://archive.debian.org/debian")   # buster left deb.debian.org for the archive
# what a Bookworm board's pip fetches from PyPI, as aarch64 wheels (setuptools/wheel build the checkout)
ARM64_WHEELS = ["numpy", "onnxruntime", "ai-edge-litert", "opencv-python-headless", "cryptography", "setuptools",
                "wheel"]
MARK = "SENSORVEIL-MATRIX"


# -- the bundles and what this machine's runtime emits ------------------------------------------
def make_bundles(work: Path) -> dict:
    """A PR-GAN and a PASS bundle (ONNX and LiteRT fp32) from short digits runs, cached in ``work``."""
    from sensorveil.export import export_run
    from sensorveil.sdk.mechanisms.pass_substitution import PASSConfig
    from sensorveil.sdk.mechanisms.prgan import PRGANConfig
    from sensorveil.sdk.runs import train_run
    bundles = {}
    runs = {
        "prgan": lambda out: train_run(
            "prgan",
            "digits",
            out=out,
            attacker_epochs=1,
            config=PRGANConfig(
                epochs=2, classifier_epochs=2, margin_fractions=(0.2,), utility_threshold=0.9, progress=False
            ),
        ),
        "pass": lambda out: train_run(
            "pass",
            "digits",
            out=out,
            attacker_epochs=1,
            config=PASSConfig(epochs=2, substitutes=64, embedding_dim=32, progress=False),
        ),
    }
    for name, train in runs.items():
        run = work / f"{name}-run"
        if not (run / "run.json").is_file():
            train(run)
        for fmt in ("onnx", "tflite"):
            bundle = work / f"{name}-{fmt}"
            if not (bundle / "manifest.json").is_file():
                export_run(run, fmt, bundle)
            bundles[f"{name}-{fmt}"] = bundle
    return bundles


def jobs_for(bundles: dict, root: str, backends: "tuple[str, ...]") -> dict:
    """board_parity.py's job file, with bundle paths as the board sees them (under ``root``)."""
    backend_of = {"onnx": "onnxruntime", "tflite": "litert", "openvino": "openvino"}
    jobs = {}
    for name, path in bundles.items():
        backend = backend_of[name.rsplit("-", 1)[1]]
        if backend in backends:
            options = {"output": "index", "seed": 5} if name.startswith("pass") else {}
            jobs[name] = {"bundle": f"{root}/{path.name}", "backend": backend, "options": options}
    return jobs


def reference_outputs(bundles: dict, jobs: dict, x: np.ndarray) -> dict:
    from sensorveil.runtime import Privatizer

    return {
        name: Privatizer.load(bundles[name], backend=job["backend"], **job["options"])(x) for name, job in jobs.items()
    }


def compare(name: str, board: np.ndarray, here: np.ndarray) -> dict:
    """fp32 outputs: max abs difference; PASS's substitute indices: the share drawn the same."""
    if name.startswith("pass"):
        return {"agreement": float(np.mean(board == here))}
    return {"max_diff": float(np.abs(board.astype(np.float64) - here).max())}


# -- rpi5-bookworm: Debian bookworm arm64 under qemu-system-aarch64 -------------------------------
BOARD_JOB = """set -u
cd /sv
echo "{mark} python $(python3 -c 'import platform; print(platform.python_version())') $(uname -m)"
if SENSORVEIL_SRC=/sv/src SENSORVEIL_VENV=/sv/venv PIP_NO_INDEX=1 PIP_FIND_LINKS=/sv/wheels \\
        bash /sv/src/sensorveil/devices/setup/rpi5-cpu.sh; then echo "{mark} installed"; fi
/sv/venv/bin/python3 /sv/src/scripts/board_parity.py /sv/jobs.json /sv/x.npz /sv/out.npz --repeats 20 \\
    && echo "{mark} out $(base64 -w0 /sv/out.npz)"
PYTHON=/sv/venv/bin/python3 sh /sv/src/scripts/device_benchmark.sh /sv/bundles/prgan-onnx npy:/sv/frames.npy 60 \\
    /sv/reports && echo "{mark} benchmark $(base64 -w0 /sv/reports/*.json)"
echo "{mark} done"
"""


def board_payload(stage: Path, wheels: Path, bundles: dict, jobs: dict, x: np.ndarray) -> None:
    """/sv inside the board: the checkout, the wheels, the bundles, the inputs and the job script."""
    sv = stage / "sv"
    checkout_files(ROOT, sv / "src")
    shutil.copytree(wheels, sv / "wheels")
    for path in bundles.values():
        shutil.copytree(path, sv / "bundles" / path.name)
    (sv / "jobs.json").write_text(json.dumps(jobs))
    np.savez(sv / "x.npz", x=x)
    np.save(sv / "frames.npy", x)
    (sv / "job.sh").write_text(BOARD_JOB.format(mark=MARK))
    (stage / "init").write_text(BOARD_INIT)
    (stage / "init").chmod(0o755)


def rpi5_bookworm(args, bundles: dict, x: np.ndarray) -> dict:
    row = {
        "board": "rpi5-bookworm",
        "profile": "rpi5-cpu",
        "arch": "aarch64 (qemu-system, cortex-a72)",
        "userland": "Debian bookworm (Raspberry Pi OS Bookworm's base)",
    }
    missing = tools_missing("debootstrap", "qemu-system-aarch64", "cpio", "dpkg-deb")
    if missing:
        return {**row, "why_not": f"needs {', '.join(missing)} (Debian packages debootstrap, qemu-system-arm, cpio)"}
    cache = Path(args.cache)
    rootfs, wheels = arm64_rootfs(cache), arm64_wheels(cache, ARM64_WHEELS)
    jobs = jobs_for(bundles, "/sv/bundles", ("onnxruntime", "litert"))
    with tempfile.TemporaryDirectory(dir=cache) as temp:
        stage = Path(temp) / "stage"
        board_payload(stage, wheels, bundles, jobs, x)
        started = time.time()
        console = boot_arm64(rootfs, initramfs(rootfs, stage, Path(temp) / "initrd.cpio"), args.timeout_s)
    (cache / "rpi5-bookworm-console.log").write_text(console)
    return {**row, **board_results(marked(console, MARK), bundles, jobs, x), "seconds": round(time.time() - started)}


def coral_mendel(args, bundles: dict, x: np.ndarray) -> dict:
    """Mendel Linux 5 (Coral Dev Board) is Debian 10 buster arm64 with Python 3.7; PyPI still serves
    tflite-runtime's cp37 aarch64 wheel, but the userland needs buster's packages. This row says
    whether any Debian mirror here serves them, and stops there when none does: the Edge TPU delegate
    (libedgetpu, from Coral's own apt repository) and the TPU could not be emulated in any case."""
    row = {
        "board": "coral-mendel",
        "profile": "coral-devboard",
        "arch": "aarch64",
        "userland": "Mendel Linux 5 (Debian 10 buster, Python 3.7)",
    }
    for mirror in BUSTER_MIRRORS:
        try:
            urllib.request.urlopen(mirror + "/dists/buster/Release", timeout=15).close()
        except (OSError, ValueError) as error:
            row.setdefault("mirrors_tried", []).append(f"{mirror}: {getattr(error, 'reason', error)}")
            continue
        return {**row, "why_not": f"{mirror} serves buster, but its arm64 boot is not scripted yet"}
    return {
        **row,
        "why_not": "no Debian mirror reachable here serves buster ("
        + "; ".join(row["mirrors_tried"])
        + "), so Mendel's userland cannot be assembled; the Edge TPU delegate needs Coral's apt repository "
        "and the TPU besides",
    }


def board_results(lines: dict, bundles: dict, jobs: dict, x: np.ndarray) -> dict:
    """The row's figures from the job's marked lines, compared with this machine's output."""
    row = {
        "python": lines.get("python", "?").split(" ")[0],
        "installs": "installed" in lines,
        "loads": "out" in lines,
        "benchmark_runs": "benchmark" in lines,
    }
    if "out" in lines:
        out = np.load(io.BytesIO(base64.b64decode(lines["out"])))
        here = reference_outputs(bundles, jobs, x)
        row["backends"] = {
            name: {
                **json_describe(out[name + "_describe"]),
                **compare(name, out[name], here[name]),
                "fps_emulated": float(out[name + "_fps"]),
            }
            for name in jobs
        }
    if "benchmark" in lines:
        report = json.loads(base64.b64decode(lines["benchmark"]))
        row["benchmark_stream_fps_emulated"] = stream_fps(report)
    return row


def json_describe(value) -> dict:
    described = json.loads(str(value))
    return {
        "library": described.get("library") or described.get("backend"),
        "library_version": described.get("library_version"),
    }


def stream_fps(report: dict) -> "float | None":
    """End-to-end FPS from device_benchmark.sh's JSON report (the first backend that streamed)."""
    fps = [row["stream_fps"] for row in report.get("rows", []) if row.get("stream_fps")]
    return float(fps[0]) if fps else None


# -- boards on this CPU: the boards' old Pythons and libraries, from pyenv and PyPI ------------------
HOST_BOARDS = {
    "ncs2-era": {
        "profile": "rpi4-ncs2",
        "python": "3.7",
        "backends": ("openvino",),
        "packages": ["numpy==1.19.5", "openvino==2022.3.1"],
        "pip": "pip<24",
        "userland": "pyenv Python 3.7 + OpenVINO 2022.3 (MYRIAD plugin's release; CPU plugin runs it)",
    },
    "jetson-floor": {
        "profile": "jetson-nano",
        "python": "3.6",
        "backends": ("onnxruntime",),
        "packages": ["numpy==1.19.5", "onnxruntime==1.10.0"],
        "pip": "pip<22",
        "userland": "pyenv Python 3.6 + numpy 1.19 + onnxruntime 1.10 (JetPack 4.6's Python; no TensorRT)",
    },
}


def pyenv_python(version: str) -> "str | None":
    found = sorted(glob.glob(f"{Path.home()}/.pyenv/versions/{version}.*/bin/python"))
    return found[-1] if found else shutil.which(f"python{version}")


def host_board(name: str, args, bundles: dict, x: np.ndarray) -> dict:
    """A venv of the board's Python with its library versions and this checkout, on this CPU."""
    spec = HOST_BOARDS[name]
    row = {
        "board": name,
        "profile": spec["profile"],
        "arch": f"{platform.machine()} (this CPU)",
        "userland": spec["userland"],
    }
    python = pyenv_python(spec["python"])
    if python is None:
        return {**row, "why_not": f"no Python {spec['python']} here (pyenv's {spec['python']}.x is expected)"}
    if spec["backends"] == ("openvino",):
        bundles = openvino_bundles(bundles, Path(args.cache) / "bundles")
    work = Path(args.cache) / name
    shutil.rmtree(work, ignore_errors=True)
    venv = work / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    installed = all(
        subprocess.run(step, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=1200).returncode == 0
        for step in (pip + ["--upgrade", spec["pip"]], pip + spec["packages"], pip + [str(ROOT)])
    )
    jobs = jobs_for(bundles, str(Path(args.cache) / "bundles"), spec["backends"])
    lines = {"python": spec["python"]}
    if installed:
        lines["installed"] = ""
        lines.update(run_on_host(venv, jobs, x, work, bundles))
    return {**row, **board_results(lines, bundles, jobs, x)}


def openvino_bundles(bundles: dict, where: Path) -> dict:
    """The NCS2 bundles: an FP16 IR for the rpi4-ncs2 target, per mechanism."""
    from sensorveil.export import export_run

    out = {}
    for mechanism in ("prgan", "pass"):
        bundle = where / f"{mechanism}-openvino"
        if not (bundle / "manifest.json").is_file():
            export_run(where / f"{mechanism}-run", None, bundle, target="rpi4-ncs2")
        out[f"{mechanism}-openvino"] = bundle
    return out


def run_on_host(venv: Path, jobs: dict, x: np.ndarray, work: Path, bundles: dict) -> dict:
    python = str(venv / "bin" / "python")
    (work / "jobs.json").write_text(json.dumps(jobs))
    np.savez(work / "x.npz", x=x)
    np.save(work / "frames.npy", x)
    lines = {}
    parity = subprocess.run(
        [python, str(PARITY), str(work / "jobs.json"), str(work / "x.npz"), str(work / "out.npz"), "--repeats", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=600,
    )
    if parity.returncode == 0:
        lines["out"] = base64.b64encode((work / "out.npz").read_bytes()).decode()
    first = next(iter(bundles.values()))
    bench = subprocess.run(
        [
            "sh",
            str(ROOT / "scripts" / "device_benchmark.sh"),
            str(first),
            f"npy:{work / 'frames.npy'}",
            "60",
            str(work / "reports"),
        ],
        env={**os.environ, "PYTHON": python},
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=600,
    )
    (work / "device_benchmark.log").write_text(bench.stdout.decode(errors="replace"))
    reports = sorted((work / "reports").glob("*.json"))
    if bench.returncode == 0 and reports:
        lines["benchmark"] = base64.b64encode(reports[-1].read_bytes()).decode()
    return lines


# -- the table ---------------------------------------------------------------------------------------
def table_rows(rows: list) -> list:
    lines = [
        "| board (profile) | arch | Python | backend and version | installs | loads | max diff vs x86 "
        "| FPS here (not the board's) | device_benchmark.sh |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        head = f"| {row['board']} ({row['profile']}) | {row['arch']} "
        if "why_not" in row:
            lines.append(head + f"| - | not run: {row['why_not']} | no | no | - | - | - |")
            continue
        backends = row.get("backends") or {"-": {}}
        for name, figures in backends.items():
            library = f"{name}: {figures.get('library', '-')} {figures.get('library_version') or ''}".strip()
            diff = (
                f"{figures['max_diff']:.2g}"
                if "max_diff" in figures
                else f"{100 * figures['agreement']:.0f}% same draws"
                if "agreement" in figures
                else "-"
            )
            fps = f"{figures['fps_emulated']:.0f}" if "fps_emulated" in figures else "-"
            bench = row.get("benchmark_stream_fps_emulated")
            lines.append(
                head + f"| {row.get('python', '?')} | {library} | {yes(row['installs'])} "
                f"| {yes(row['loads'])} | {diff} | {fps} | "
                f"{'runs, ' + format(bench, '.0f') + ' FPS end to end' if bench else yes(row.get('benchmark_runs'))} |"
            )
    return lines


def yes(flag) -> str:
    return "yes" if flag else "no"


def markdown(results: dict) -> str:
    lines = [
        "# The runtime on each board's own software (emulated)",
        "",
        page_header(recorded(results)),
        "",
        "Each board's userland runs this checkout's runtime as its set-up script installs it; "
        "a PR-GAN and a PASS bundle privatize the same 24 digits samples there and here. *max diff*: "
        "against this machine's runtime on the same bundle and backend (fp32: <= 1e-4 expected; the NCS2's "
        "FP16 IR on two OpenVINO releases: about 1e-2); for PASS, the share of substitutes "
        "drawn the same with the same seed. *FPS here*: batch-1 calls a second under "
        "emulation (arm64) or on this CPU (the old stacks): they say that the code runs, not how fast the "
        "board is. *device_benchmark.sh*: the script run unchanged there, on the PR-GAN bundle.",
        "",
    ]
    lines += table_rows(results["rows"]) + [""]
    lines += [f"- {row['board']}: measured {row['measured']}." for row in results["rows"] if row.get("measured")] + [""]
    failing = [row["board"] for row in results["rows"] if "why_not" not in row and not row.get("benchmark_runs")]
    if failing:
        lines += [
            f"`device_benchmark.sh` did not finish on {', '.join(failing)}: its log is in the cache folder "
            "(BOARD/device_benchmark.log, or the console log).",
            "",
        ]
    lines += [
        "## What this cannot show",
        "",
        "- TensorRT engines (Jetson): NVIDIA's L4T userland and a GPU; `jetson-floor` runs JetPack 4.6's "
        "Python and numpy with onnxruntime only.",
        "- The NCS2's MYRIAD plugin: OpenVINO 2022.3 runs here on its CPU plugin.",
        "- The Edge TPU delegate and compiler (Coral): `sensorveil devices check --device coral-usb` checks the "
        "graph against the Edge TPU's operator list instead.",
        "- 32-bit Raspberry Pi OS (armhf), which the rpi3/rpi4 NCS2 set-up assumes: PyPI serves no armv7l "
        "wheels of onnxruntime or OpenVINO.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", nargs="+", default=list(BOARDS), choices=list(BOARDS))
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "sensorveil-matrix"))
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument("--timeout-s", type=float, default=2400.0, help="limit of one emulated boot")
    parser.add_argument(
        "--require", action="store_true", help="exit 1 unless every board run installs, loads and matches (CI)"
    )
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    args = parser.parse_args()
    # a page written outside this checkout's docs/ (CI's --docs) is no committed page: any tree may write it,
    # and its header says whether the tree was dirty
    allow_dirty = args.allow_dirty or Path(args.docs).resolve() != ROOT / "docs"
    require_clean(allow_dirty)
    record = provenance(allow_dirty=allow_dirty)   # the commit and date the run starts from
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    from sensorveil.sdk.datasets import load_dataset

    x = load_dataset("digits").x[:24]
    bundles = make_bundles(cache / "bundles")
    rows = []
    for board in args.boards:
        print(f"[matrix] {board} ...", flush=True)
        rows.append(BOARDS[board](args, bundles, x))
        print(f"[matrix] {json.dumps(rows[-1])}", flush=True)
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for row in rows:
        row["measured"] = now
    docs = Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)
    results = {
        "command": "python scripts/device_matrix.py " + " ".join(sys.argv[1:]),
        "timestamp": now,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "rows": with_earlier_rows(rows, docs / "devices.json"),
        "provenance": record,
    }
    results = portable(results, shared=SHARED)
    (docs / "devices.json").write_text(json.dumps(results, indent=2))
    (docs / "devices.md").write_text(markdown(results))
    print("\n".join(table_rows(rows)))
    if args.require and not all(passed(row) for row in rows):
        sys.exit(1)


def with_earlier_rows(rows: list, earlier_json: Path) -> list:
    """This run's rows, plus (in board order) the rows of boards it did not run, from the page's last
    generation, so ``--boards X`` refreshes X without dropping the others; each row says when it was measured."""
    earlier = json.loads(earlier_json.read_text()) if earlier_json.is_file() else {"rows": []}
    fresh = {row["board"] for row in rows}
    kept = {
        row["board"]: {**row, "measured": row.get("measured", earlier.get("timestamp"))}
        for row in earlier["rows"]
        if row["board"] not in fresh and row["board"] in BOARDS
    }
    merged = {**kept, **{row["board"]: row for row in rows}}
    return [merged[board] for board in BOARDS if board in merged]


def passed(row: dict) -> bool:
    figures = (row.get("backends") or {}).values()
    return (
        row.get("installs")
        and row.get("loads")
        and row.get("benchmark_runs")
        and bool(figures)
        and all(f.get("max_diff", 0) <= 1e-4 and f.get("agreement", 1) >= 0.9 for f in figures)
    )


BOARDS = {
    "rpi5-bookworm": rpi5_bookworm,
    **{name: (lambda args, bundles, x, name=name: host_board(name, args, bundles, x)) for name in HOST_BOARDS},
    "coral-mendel": coral_mendel,
}

if __name__ == "__main__":
    main()
