"""cpu_policy: "shared" (threads that sleep, sized to leave cores to others) and "dedicated" (the libraries'
defaults) both load and run on every CPU backend here; onnxruntime's shared sessions really stop spinning;
a wrong value is one clear error; `benchmark --contend` prints quiet and contended figures and leaves no
busy process behind. Speed itself is the benchmark's to report, never asserted here."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from sensorveil.runtime import Privatizer
from sensorveil.runtime.backends.cpu_policy import CPU_POLICIES, shared_threads
from sensorveil.runtime.errors import InputError
from sensorveil.runtime.stream import load_for_stream


def run_once(privatizer) -> np.ndarray:
    spec = privatizer.input_spec
    frame = np.random.default_rng(0).uniform(spec.low, spec.high, size=(2, *spec.sample_shape)).astype(spec.dtype)
    out = privatizer(frame)
    assert out.shape == frame.shape
    return out


@pytest.fixture(scope="module")
def other_format_bundles(digits_run, tmp_path_factory):
    """tflite and OpenVINO bundles of the same run, where their exporters and runtimes are installed."""
    from sensorveil.export import export_run
    root, bundles = tmp_path_factory.mktemp("cpu-policy"), {}
    if importlib.util.find_spec("litert_torch") and importlib.util.find_spec("ai_edge_litert"):
        bundles["litert"] = export_run(digits_run, "tflite", root / "tflite")
    if importlib.util.find_spec("openvino"):
        bundles["openvino"] = export_run(digits_run, "openvino", root / "openvino")
    return bundles


@pytest.mark.parametrize("policy", CPU_POLICIES)
@pytest.mark.exports
@pytest.mark.trains
def test_each_policy_loads_and_runs_on_onnxruntime(digits_bundle, policy):
    privatizer = Privatizer.load(digits_bundle, backend="onnxruntime", cpu_policy=policy)
    run_once(privatizer)
    assert privatizer.pipeline.backend.describe()["cpu_policy"] == policy


@pytest.mark.parametrize("backend", ["litert", "openvino"])
@pytest.mark.parametrize("policy", CPU_POLICIES)
@pytest.mark.exports
@pytest.mark.trains
def test_each_policy_loads_and_runs_on_the_other_cpu_backends(other_format_bundles, backend, policy):
    if backend not in other_format_bundles:
        pytest.skip(f"{backend} is not installed here")
    privatizer = Privatizer.load(other_format_bundles[backend], backend=backend, cpu_policy=policy)
    run_once(privatizer)
    described = privatizer.pipeline.backend.describe()
    assert described["cpu_policy"] == policy
    if backend == "openvino" and policy == "shared":
        assert described["config"]["PERFORMANCE_HINT"] == "LATENCY" and described["config"]["NUM_STREAMS"] == "1"
        assert described["config"]["INFERENCE_NUM_THREADS"] == str(shared_threads())
    if backend == "litert":
        assert described["threads"] == (shared_threads() if policy == "shared" else "default")


@pytest.mark.exports
@pytest.mark.trains
def test_shared_onnxruntime_session_does_not_spin(digits_bundle):
    shared = Privatizer.load(digits_bundle, backend="onnxruntime", cpu_policy="shared").pipeline.backend
    options = shared.session.get_session_options()     # read back from the live session
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == shared_threads()
    dedicated = Privatizer.load(digits_bundle, backend="onnxruntime").pipeline.backend    # the plain default
    assert dedicated.cpu_policy == "dedicated"
    assert dedicated.session.get_session_options().intra_op_num_threads == 0     # onnxruntime's own default


@pytest.mark.exports
@pytest.mark.trains
def test_explicit_threads_win_over_the_policy(digits_bundle):
    backend = Privatizer.load(digits_bundle, backend="onnxruntime", cpu_policy="shared", threads=2).pipeline.backend
    assert backend.session.get_session_options().intra_op_num_threads == 2


@pytest.mark.exports
@pytest.mark.trains
def test_the_stream_default_is_shared(depth_bundle):
    privatizer = load_for_stream(depth_bundle, backend="onnxruntime")
    assert privatizer.backend_options["cpu_policy"] == "shared"
    assert privatizer.pipeline.backend.describe()["spinning"] is False


@pytest.mark.parametrize("load", [Privatizer.load, load_for_stream])
@pytest.mark.exports
@pytest.mark.trains
def test_an_unknown_policy_is_one_clear_error(digits_bundle, load):
    with pytest.raises(InputError) as error:
        load(digits_bundle, backend="onnxruntime", cpu_policy="turbo")
    message = str(error.value)
    assert "'turbo'" in message and "shared" in message and "dedicated" in message


def busy_children(pid: int) -> list:
    """Live descendants of ``pid`` (from /proc, so no psutil needed)."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            children.append(int(entry))
    return children


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find leftover processes")
@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_contend_prints_both_columns_and_leaves_nothing_behind(depth_bundle, tmp_path):
    result = subprocess.run([sys.executable, "-m", "sensorveil", "benchmark", str(depth_bundle), "--contend", "1",
                             "--frames", "20", "--json", str(tmp_path / "contend.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    table = result.stdout
    assert "quiet FPS" in table and "1 busy FPS" in table and "settings used" in table
    for policy in CPU_POLICIES:
        assert f"{policy}: " in table and any(line.startswith(policy) for line in table.splitlines())
    assert max(len(line) for line in table.splitlines()) <= 100
    pids = json.loads((tmp_path / "contend.json").read_text())["contender_pids"]
    assert len(pids) == len(CPU_POLICIES)     # one busy process per policy's contended run
    assert not [pid for pid in pids if os.path.exists(f"/proc/{pid}") and busy_loop_process(pid)]


def busy_loop_process(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"multiprocessing" in cmdline.read()
    except OSError:
        return False


def test_contenders_are_stopped_even_on_an_error():
    from sensorveil.benchmarks.contention import Contenders
    with pytest.raises(RuntimeError):
        with Contenders(1) as contenders:
            pids = contenders.pids
            assert len(pids) == 1 and os.path.exists(f"/proc/{pids[0]}")
            raise RuntimeError("the measurement failed")
    assert not [pid for pid in pids if pid in busy_children(os.getpid())]
