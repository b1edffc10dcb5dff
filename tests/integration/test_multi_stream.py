"""benchmark --streams N: N sensors into one runtime, one batched call per round."""
from __future__ import annotations

import json

import pytest

from sensorveil.benchmarks.multi_stream import stream_counts
from sensorveil.cli import main
from sensorveil.runtime.stream import stream_threads


def test_stream_counts_double_up_to_the_asked_number():
    assert stream_counts(1) == [1]
    assert stream_counts(6) == [1, 2, 4, 6]
    assert stream_counts(8) == [1, 2, 4, 8]


@pytest.mark.exports
@pytest.mark.trains
def test_benchmark_streams_prints_one_row_per_stream_count(depth_bundle, tmp_path, capsys):
    out = tmp_path / "streams.json"
    assert main(["benchmark", str(depth_bundle), "--streams", "3", "--frames", "12", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines()) <= 100
    result = json.loads(out.read_text())
    assert [row["streams"] for row in result["rows"]] == [1, 2, 3]
    # a depth bundle's rounds are read ahead, beside a model on every core but the reader's
    assert result["read_ahead"] is True and result["model_threads"] == stream_threads()
    for row in result["rows"]:
        assert row["rounds"] == 12 and row["aggregate_fps"] > 0
        assert row["latency_p95_ms"] >= row["latency_p50_ms"] > 0
        assert abs(row["per_stream_fps"] * row["streams"] - row["aggregate_fps"]) < 1e-6 * row["aggregate_fps"]
