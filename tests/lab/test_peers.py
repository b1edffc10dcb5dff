"""scripts/compare_peers.py runs deface and `sensorveil run` on the same clip and writes the table."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import WALKWAY

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_compare_peers_runs_both_tools_on_the_same_frames(depth_bundle, tmp_path):
    pytest.importorskip("deface", reason="the peer comparison needs deface (pip install 'sensorveil[peers]')")
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
    out_json, out_md = tmp_path / "peers.json", tmp_path / "peers.md"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "compare_peers.py"), "--frames", "8",
                           "--bundle", str(depth_bundle), "--out", str(tmp_path / "work"), "--json", str(out_json),
                           "--markdown", str(out_md), "--allow-dirty"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(out_json.read_text())
    assert [row["tool"] for row in result["rows"]] == ["deface", "sensorveil"]
    for row in result["rows"]:
        assert row["frames_in"] == 8 and row["frames_written"] == 8   # every frame went through each tool
        assert row["cpu_s_per_frame"] > 0 and row["fps"] > 0
    page = out_md.read_text()
    assert "not their privacy" in page and "| deface |" in page and "| sensorveil |" in page


@pytest.mark.exports
@pytest.mark.trains
def test_benchmark_prints_the_stream_as_a_multiple_of_deface_on_the_same_frames(depth_bundle, tmp_path, capsys):
    """`sensorveil benchmark --versus deface`: deface's CPU a frame (start-up taken out) beside the stream's."""
    pytest.importorskip("deface", reason="the peer comparison needs deface (pip install 'sensorveil[peers]')")
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
    from sensorveil.cli import main
    out = tmp_path / "bench.json"
    assert main(["benchmark", str(depth_bundle), "--source", str(WALKWAY), "--frames", "20", "--attacker-epochs", "0",
                 "--versus", "deface", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    peer = result["versus"]
    assert peer["tool"] == "deface" and peer["frames"] == 20 and peer["cpu_ms_per_frame"] > 0
    row = next(row for row in result["rows"] if row.get("stream_cpu_ms_per_frame"))
    assert row["times_deface"] == pytest.approx(peer["cpu_ms_per_frame"] / row["stream_cpu_ms_per_frame"])
    assert f"{row['times_deface']:.1f}x deface's frames per CPU-second" in printed


@pytest.mark.boots
def test_deface_installs_measures_each_backend_it_is_asked_for():
    """scripts/deface_installs.py: deface's CPU a frame with a forced --backend, the backend in the command."""
    pytest.importorskip("deface", reason="the peer comparison needs deface (pip install 'sensorveil[peers]')")
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
    from sensorveil.benchmarks.peers import deface_command, deface_cpu_per_frame
    row = deface_cpu_per_frame(WALKWAY, frames=5, warmup=3, backend="opencv")
    assert row["frames"] == 5 and row["command"].endswith("--backend opencv")
    with pytest.raises(RuntimeError, match="failed"):     # deface refuses a backend it does not have
        deface_cpu_per_frame(WALKWAY, frames=2, warmup=2, backend="no-such-runner")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "deface_installs.py"), "--clip", str(WALKWAY),
                           "--frames", "4", "--warmup", "2", "--deface", deface_command()[0], "--backends", "opencv"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| " + deface_command()[0])]
    assert len(rows) == 1 and "| opencv |" in rows[0]
