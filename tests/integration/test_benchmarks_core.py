"""Core benchmark utilities: FLOP/param counts, latency stats, reports."""
import json
import time

import pytest

from sensorveil.benchmarks.latency import matmul_peak_gflops, measure_latency, percentiles
from sensorveil.benchmarks.report import cpu_description, format_table, write_report
from sensorveil.costs.onnx_counts import onnx_flops, onnx_params
from sensorveil.costs.torch_counts import torch_flops, torch_params

torch = pytest.importorskip("torch")
nn = torch.nn


class TinyNet(nn.Module):
    """Covers Conv (plain + grouped), ConvTranspose (stride 2), MatMul, Gemm."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=4)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.tok = nn.Linear(64, 32)       # on a 3-D tensor -> ONNX MatMul
        self.head = nn.Linear(4 * 32, 10)  # on a 2-D tensor -> ONNX Gemm

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        x = self.up(x)                       # (N, 4, 16, 16)
        x = self.tok(x.reshape(x.shape[0], 4, 256)[..., :64])
        return self.head(x.flatten(1))


def _export(model, path, dynamo):
    # Traced at batch 2 with a dynamic batch axis; counted later at batch 3,
    # so a broken batch substitution cannot pass.  Each exporter gets the
    # dynamic-batch spelling it supports without deprecation warnings.
    if dynamo:
        dyn = {"dynamic_shapes": ({0: torch.export.Dim("batch")},)}
    else:
        dyn = {"dynamic_axes": {"input": {0: "batch"}, "output": {0: "batch"}}}
    torch.onnx.export(model, (torch.randn(2, 3, 16, 16),), str(path), dynamo=dynamo,
                      opset_version=17, input_names=["input"], output_names=["output"],
                      **dyn)
    return path


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return TinyNet().eval()


@pytest.fixture(scope="module")
def legacy_onnx(tiny, tmp_path_factory):
    return _export(tiny, tmp_path_factory.mktemp("onnx") / "tiny.onnx", dynamo=False)


@pytest.mark.exports
def test_single_conv_matches_hand_count(tmp_path):
    conv = nn.Conv2d(3, 8, 3, padding=1).eval()
    expected = 2 * 8 * 3 * 3 * 3 * 16 * 16  # 2 * Cout * Cin * k*k * H*W
    assert torch_flops(conv, torch.randn(1, 3, 16, 16)) == expected
    path = _export(conv, tmp_path / "conv.onnx", dynamo=False)
    assert onnx_flops(path, batch=1)["total"] == expected
    assert onnx_flops(path, batch=4)["total"] == 4 * expected


@pytest.mark.exports
def test_flops_agree_legacy_exporter(tiny, legacy_onnx):
    ref = torch_flops(tiny, torch.randn(3, 3, 16, 16))
    got = onnx_flops(legacy_onnx, batch=3)
    assert got["unresolved"] == []
    assert {"Conv", "ConvTranspose", "MatMul", "Gemm"} <= set(got["by_op"])
    assert got["total"] == pytest.approx(ref, rel=0.01)


@pytest.mark.exports
def test_elementwise_reported_but_not_in_total(legacy_onnx):
    got = onnx_flops(legacy_onnx, batch=1)
    mac_ops = ("Conv", "ConvTranspose", "MatMul", "Gemm")
    assert got["total"] == sum(got["by_op"][k] for k in mac_ops)
    # two ReLUs: 8*16*16 + 8*8*8 outputs at batch 1
    assert got["by_op"]["Relu"] == 8 * 16 * 16 + 8 * 8 * 8
    assert got["elementwise"] >= got["by_op"]["Relu"]


@pytest.mark.exports
def test_flops_agree_default_dynamo_exporter(tiny, tmp_path):
    pytest.importorskip("onnxscript")
    path = _export(tiny, tmp_path / "tiny_dynamo.onnx", dynamo=True)
    ref = torch_flops(tiny, torch.randn(3, 3, 16, 16))
    assert onnx_flops(path, batch=3)["total"] == pytest.approx(ref, rel=0.01)
    assert onnx_params(path) == torch_params(tiny)


@pytest.mark.exports
def test_onnx_params_equal_torch_params(tiny, legacy_onnx):
    n = torch_params(tiny)
    assert n == sum(p.numel() for p in tiny.parameters()) > 0
    assert onnx_params(legacy_onnx) == n


def test_percentiles_ordered_and_fps():
    stats = percentiles([1.0] * 90 + [5.0] * 9 + [50.0])
    assert stats["p50_ms"] == 1.0
    assert stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"] <= 50.0
    assert stats["fps"] == pytest.approx(1000.0 / stats["mean_ms"])
    with pytest.raises(ValueError):
        percentiles([])


def test_measure_latency_sleep():
    stats = measure_latency(lambda _: time.sleep(0.001), None, warmup=2, iters=30)
    assert stats["iters"] == 30
    assert 0.9 <= stats["p50_ms"] < 50
    assert stats["min_ms"] <= stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"]
    assert stats["fps"] == pytest.approx(1000.0 / stats["mean_ms"])


def test_measure_latency_calls_factory_outside_timing():
    calls = []

    def factory():
        time.sleep(0.005)  # slow input creation must not show up in latency
        calls.append(1)
        return 1

    stats = measure_latency(lambda x: x + 1, factory, warmup=3, iters=10, progress=True)
    assert len(calls) == 13
    assert stats["p99_ms"] < 2.0


def test_matmul_peak_positive():
    assert matmul_peak_gflops(n=256, repeats=3) > 0


ROWS = [
    {"backend": "torch", "precision": "fp32", "params": 1234567, "p50_ms": 3.14159, "fps": 310.5},
    {"backend": "onnxruntime", "precision": "int8", "params": 1234567, "p50_ms": 1.5,
     "fps": 640.25, "overhead_ratio": 1.07},
]


def test_write_report_outputs(tmp_path):
    np = pytest.importorskip("numpy")
    samples = {"runtime_samples_ms": [1.0, 1.2, 0.9]}   # the plot's latency distribution
    results = {"bundle": "tiny", "cpu": cpu_description(), "timestamp": "2024-01-01T00:00:00",
               "rows": [dict(ROWS[0], flops_torch=np.int64(42), **samples), dict(ROWS[1], **samples)]}
    paths = {k: tmp_path / f"r.{k}" for k in ("json", "md", "png")}
    written = write_report(results, paths["json"], paths["md"], paths["png"])
    assert set(written) == {"json", "markdown", "plot"}

    data = json.loads(paths["json"].read_text())
    assert data["rows"][0]["flops_torch"] == 42 and data["bundle"] == "tiny"

    md = paths["md"].read_text().splitlines()
    header = next(i for i, line in enumerate(md) if line.startswith("| backend"))
    cols = [c.strip() for c in md[header].strip("|").split("|")]
    assert cols == ["backend", "precision", "params", "p50_ms", "fps",
                    "flops_torch", "overhead_ratio"]
    assert set(md[header + 1]) <= set("|-: ")
    assert md[header + 3].startswith("| onnxruntime | int8 |")

    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_format_table_aligns_columns():
    lines = format_table(ROWS).splitlines()
    assert len(lines) == 4 and set(lines[1]) == {"-", " "}
    # text column: left edges line up with the header
    left = lines[0].index("precision")
    assert lines[2][left:left + 4] == "fp32" and lines[3][left:left + 4] == "int8"
    # numeric columns: right edges line up with the header
    for col, top, bottom in (("params", "1,234,567", "1,234,567"),
                             ("fps", "310.5", "640.2"),
                             ("p50_ms", "3.142", "1.500")):
        end = lines[0].index(col) + len(col)
        assert lines[2][end - len(top):end] == top
        assert lines[3][end - len(bottom):end] == bottom
    assert lines[3].endswith("1.070")  # key only present in the second row


def test_cpu_description_keys():
    d = cpu_description()
    assert d["logical_cores"] >= 1 and d["machine"] and d["model"]


def test_the_summary_table_fps_is_the_json_fps_not_one_over_the_median():
    """One FPS per bundle: the table, the report's JSON and the quickstart all show 1000 / mean."""
    from sensorveil.benchmarks.report import SUMMARY_COLUMNS, summary_cells
    row = {"format": "onnx", "precision": "fp32", "backend": "onnxruntime", "status": "ok",
           "runtime_p50_ms": 0.1, "fps": 1234.4}   # a median of 0.1 ms would read 10,000 FPS
    cells = dict(zip([c[0] for c in SUMMARY_COLUMNS], summary_cells(row, None)))
    assert cells["FPS"] == "1,234" and cells["p50 ms"] == "0.100"
