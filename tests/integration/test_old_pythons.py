"""The runtime on the boards' own Python stacks, for real: the checkout installed with pip into a
virtual environment of pyenv's Python 3.6 (Jetson Nano, JetPack 4.6) with numpy 1.19 and onnxruntime
1.10 (its last release for 3.6), and of Python 3.7 (Coral's Mendel, Raspberry Pi + NCS2 stacks) with
OpenVINO 2022.3 (the last release with the MYRIAD plugin, whose API lives in openvino.runtime) and
tflite-runtime. Each loads bundles exported here and must emit what this machine's runtime emits.
No torch is installed there, so this also proves the runtime torch-free on those Pythons.

Needs the interpreters (pyenv ships them on this project's machines) and the package registry; it
skips with the reason when either is missing."""
from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sensorveil.runtime import Privatizer

pytestmark = [pytest.mark.boots, pytest.mark.exports, pytest.mark.trains]

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "scripts" / "board_parity.py"   # shared with scripts/device_matrix.py


def interpreter(version: str) -> str:
    found = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python")) or \
        [p for p in (f"/usr/bin/python{version}",) if Path(p).exists()]
    if not found:
        pytest.skip(f"no Python {version} interpreter here (pyenv's {version}.x is expected)")
    return found[-1]


def board_venv(tmp_path_factory, version: str, packages: list) -> Path:
    """A fresh venv of that Python with the board's packages and this checkout, as a set-up script does."""
    venv = tmp_path_factory.mktemp(f"py{version.replace('.', '')}") / "venv"
    subprocess.run([interpreter(version), "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # the pip a 3.6 venv starts with predates manylinux2014 wheels; 21.3 is the last for 3.6
    steps = [pip + ["--upgrade", "pip<22" if version == "3.6" else "pip<24"], pip + packages, pip + [str(ROOT)]]
    for step in steps:
        result = subprocess.run(step, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                timeout=900)
        if result.returncode != 0:
            if "No matching distribution" in result.stdout or "Could not fetch" in result.stdout:
                pytest.skip(f"the package registry is not reachable here: {result.stdout[-300:]}")
            raise AssertionError(result.stdout[-3000:])
    return venv


def run_on_board(venv: Path, jobs: dict, x: np.ndarray, tmp_path: Path) -> tuple[dict, str]:
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    np.savez(tmp_path / "x.npz", x=x)
    result = subprocess.run([str(venv / "bin" / "python"), str(RUNNER), str(tmp_path / "jobs.json"),
                             str(tmp_path / "x.npz"), str(tmp_path / "out.npz")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    out = np.load(tmp_path / "out.npz")
    return {key: out[key] for key in out.files}, result.stdout


@pytest.fixture(scope="module")
def inputs():
    from sensorveil.sdk.datasets import load_dataset
    return load_dataset("digits").x[:24]


@pytest.fixture(scope="module")
def pass_run(tmp_path_factory):
    from sensorveil.sdk.mechanisms.pass_substitution import PASSConfig
    from sensorveil.sdk.runs import train_run
    return train_run("pass", "digits", out=tmp_path_factory.mktemp("runs") / "pass", attacker_epochs=1,
                     config=PASSConfig(epochs=2, substitutes=64, embedding_dim=32, progress=False))


def test_python_3_6_numpy_1_19_onnxruntime_1_10(tmp_path_factory, tmp_path, digits_bundle, pass_run, inputs):
    from sensorveil.export import export_run
    pass_bundle = export_run(pass_run, "onnx", tmp_path / "pass")
    venv = board_venv(tmp_path_factory, "3.6", ["numpy==1.19.5", "onnxruntime==1.10.0"])
    jobs = {"prgan": {"bundle": str(digits_bundle), "backend": "onnxruntime"},
            "pass": {"bundle": str(pass_bundle), "backend": "onnxruntime", "options": {"output": "index", "seed": 5}}}
    out, log = run_on_board(venv, jobs, inputs, tmp_path)
    assert "torch importable: False" in log
    assert np.abs(out["prgan"] - Privatizer.load(digits_bundle)(inputs)).max() <= 1e-4
    here = Privatizer.load(pass_bundle, output="index", seed=5)(inputs)
    assert np.mean(out["pass"] == here) >= 0.9     # same seed; a draw on a float boundary may differ
    assert json.loads(str(out["prgan_describe"]))["library_version"].startswith("1.10")
    report = device_benchmark(venv, digits_bundle, inputs, tmp_path)
    assert report["rows"][0]["backend"] == "onnxruntime" and report["rows"][0]["stream_fps"] > 0


def device_benchmark(venv: Path, bundle: Path, frames: np.ndarray, tmp_path: Path) -> dict:
    """scripts/device_benchmark.sh unchanged, with the board's Python: its report."""
    np.save(tmp_path / "frames.npy", frames)
    result = subprocess.run(["sh", str(ROOT / "scripts" / "device_benchmark.sh"), str(bundle),
                             "npy:" + str(tmp_path / "frames.npy"), "30", str(tmp_path / "reports")],
                            env={**os.environ, "PYTHON": str(venv / "bin" / "python")}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    return json.loads(sorted((tmp_path / "reports").glob("*.json"))[-1].read_text())


def test_python_3_7_openvino_2022_3_and_tflite_runtime(tmp_path_factory, tmp_path, digits_run, pass_run, inputs):
    from sensorveil.export import export_run
    bundles = {"ncs2": export_run(digits_run, None, tmp_path / "ncs2", target="rpi4-ncs2"),
               "pass-ncs2": export_run(pass_run, None, tmp_path / "pass-ncs2", target="rpi4-ncs2"),
               "coral": export_run(digits_run, None, tmp_path / "coral", target="coral-usb", calibration=64,
                                   int8_check=False)}
    venv = board_venv(tmp_path_factory, "3.7", ["numpy==1.19.5", "openvino==2022.3.1", "tflite-runtime"])
    jobs = {"ncs2": {"bundle": str(bundles["ncs2"]), "backend": "openvino"},
            "pass-ncs2": {"bundle": str(bundles["pass-ncs2"]), "backend": "openvino",
                          "options": {"output": "index", "seed": 5}},
            "coral": {"bundle": str(bundles["coral"]), "backend": "litert"}}
    out, log = run_on_board(venv, jobs, inputs, tmp_path)
    assert "torch importable: False" in log
    described = json.loads(str(out["ncs2_describe"]))
    assert described["library_version"].startswith("2022.3") and described["device"] == "CPU"
    assert json.loads(str(out["coral_describe"]))["library"] == "tflite-runtime"
    # fp16 IR: the same model on two OpenVINO releases
    assert np.abs(out["ncs2"] - Privatizer.load(bundles["ncs2"], backend="openvino")(inputs)).max() <= 16 * 1e-2
    # int8: tflite-runtime 2.x and today's LiteRT requantize with different rounding, so a one-step
    # difference inside the graph can grow to a few output steps in rare elements (3 of 1,536 here);
    # the same model nonetheless, which a different or mis-quantized graph would not be
    steps = np.abs(out["coral"] - Privatizer.load(bundles["coral"], backend="litert")(inputs)) / (16 / 255)
    assert np.mean(steps <= 1.01) >= 0.99 and steps.max() <= 4.01, (np.mean(steps <= 1.01), steps.max())
    here = Privatizer.load(bundles["pass-ncs2"], backend="openvino", output="index", seed=5)(inputs)
    assert np.mean(out["pass-ncs2"] == here) >= 0.9
