"""A stream report's figures: per-stage latency summaries and what the runtime adds to the model.
Runs on the boards' Python (3.6): no annotations import here."""
import numpy as np


def summarize_ms(values) -> dict:
    array = np.asarray(values, dtype=np.float64)
    p50, p95 = np.percentile(array, [50, 95])
    return {"mean": float(array.mean()), "p50": float(p50), "p95": float(p95)}


def runtime_overhead(stages: dict) -> dict:
    """What the runtime adds on top of the bare model per frame, from medians (robust to load
    spikes of other processes; the same choice as the benchmark's overhead_ratio_p50).

    ``runtime_added_*``: preprocess + postprocess, i.e. everything the runtime does per frame
    besides the backend, the sensor (capture) and the application's sink; this includes the
    frame-to-sample work (person finding, resizing). ``units_*``: the Privatizer's own part of
    it (input validation and the sensor<->model unit mapping), what the runtime adds to a
    caller who hands it samples.
    """
    median = {stage: stages[stage]["p50"] for stage in stages}
    model = median["inference"]
    added = median.get("preprocess", 0.0) + median.get("postprocess", 0.0)
    units = median.get("units", 0.0)
    return {"model_ms_p50": model, "runtime_added_ms_p50": added, "units_ms_p50": units,
            "runtime_added_fraction": added / model if model > 0 else None,
            "units_fraction": units / model if model > 0 else None}
