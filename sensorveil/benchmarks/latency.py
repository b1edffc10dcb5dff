"""Wall-clock latency measurement and a CPU matmul peak for context."""
import time

import numpy as np


def percentiles(samples_ms) -> dict:
    """Summary statistics of latency samples in milliseconds."""
    a = np.asarray(samples_ms, dtype=np.float64)
    if a.size == 0:
        raise ValueError("percentiles: no samples")
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    mean = float(a.mean())
    return {
        "p50_ms": float(p50), "p95_ms": float(p95), "p99_ms": float(p99),
        "mean_ms": mean, "min_ms": float(a.min()), "max_ms": float(a.max()),
        "std_ms": float(a.std()),
        # fps from the mean, not p50: throughput is what the mean describes.
        "fps": 1000.0 / mean if mean > 0 else float("inf"),
    }


def _progress(iterable, enabled: bool, desc: str):
    """Wrap in tqdm when asked for and available; tqdm is optional."""
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, desc=desc or "latency", leave=False, disable=None)


def _input_source(make_input_or_input):
    """A zero-arg callable yielding the next input.

    A callable is treated as a factory and called once per iteration (outside
    the timed region) so backends cannot benefit from re-seeing one buffer.
    """
    if callable(make_input_or_input):
        return make_input_or_input
    return lambda: make_input_or_input


def measure_latency(fn, make_input_or_input, warmup: int = 20, iters: int = 200,
                    progress: bool = False, desc: str = "") -> dict:
    """Time `fn(input)` `iters` times after `warmup` untimed calls.

    Returns percentiles() keys plus ``iters`` and ``warmup``.
    """
    if iters < 1:
        raise ValueError("iters must be >= 1")
    next_input = _input_source(make_input_or_input)
    for _ in range(warmup):  # lets lazy init, caches and JITs settle
        fn(next_input())
    samples = np.empty(iters, dtype=np.float64)
    for i in _progress(range(iters), progress, desc):
        x = next_input()
        t0 = time.perf_counter()
        fn(x)
        samples[i] = (time.perf_counter() - t0) * 1e3
    stats = percentiles(samples)
    stats.update(iters=iters, warmup=warmup)
    return stats


def matmul_peak_gflops(n: int = 1024, repeats: int = 10) -> float:
    """Best-of-`repeats` fp32 numpy matmul throughput in GFLOP/s (2*n^3 flops).

    A practical ceiling for this CPU (with numpy's BLAS and thread count),
    so reports can express achieved GFLOP/s as a fraction of it.
    """
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    np.matmul(a, b, out=out)  # warm BLAS threads and caches
    best = float("inf")
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        np.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / max(best, 1e-9) / 1e9   # perf_counter seconds (perf_counter_ns needs 3.7)
