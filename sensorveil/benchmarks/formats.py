"""`sensorveil benchmark RUN_DIR --formats all`: export a run to every format and precision, validate
each, then measure every artefact the same way: latency through the runtime, and the probing attack
on what that artefact emits (quantization can change privacy, so it is measured, not assumed).

One row per format and precision; a failed export is a row too, with its reason. Exporting needs
the trainer's stack (torch, sensorveil.export) and is imported only here, only for a RUN_DIR: a
bundle is measured with the runtime alone, its privacy figures then come from its manifest unless
its training run is on this machine.
"""
import importlib.util
import json
from pathlib import Path

from sensorveil.benchmarks.bench import PRIVACY_KEYS, benchmark_bundle
from sensorveil.runtime import open_bundle
from sensorveil.runtime.backends import library_available
from sensorveil.runtime.bundle import MANIFEST_NAME
from sensorveil.runtime.capabilities import benchmarked_precisions

# the precisions each export format is measured in (sensorveil.runtime.capabilities); onnx int8 is QDQ for CPU boards
FORMAT_PRECISIONS = benchmarked_precisions()
DEFAULT_ATTACKER_EPOCHS = 3


def parse_formats(text: "str | None") -> "list[tuple[str, str]]":
    """``all``, ``onnx,tflite`` or ``onnx:fp32,tflite:int8`` -> (format, precision) pairs in the table's
    order; a format without ``:precision`` stands for every precision it writes."""
    if text in (None, "", "all"):
        text = ",".join(FORMAT_PRECISIONS)
    pairs = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        fmt, _, precision = item.partition(":")
        if fmt not in FORMAT_PRECISIONS or (precision and precision not in FORMAT_PRECISIONS[fmt]):
            raise ValueError(f"--formats {text!r}: expected 'all' or a comma-separated list of FORMAT or "
                             "FORMAT:PRECISION, from " + "; ".join(f"{name}: {', '.join(precisions)}"
                                                                   for name, precisions in FORMAT_PRECISIONS.items()))
        pairs += [(fmt, p) for p in ((precision,) if precision else FORMAT_PRECISIONS[fmt])]
    if not pairs:
        raise ValueError(f"--formats {text!r}: names no format")
    return pairs


def is_run_dir(path) -> bool:
    return (Path(path) / "run.json").is_file() and not (Path(path) / MANIFEST_NAME).is_file()


def export_all(run_dir, pairs: "list[tuple[str, str]]", bundles_dir, attacker_epochs: int, log=print) -> "list[dict]":
    """Export every (format, precision); returns one entry per pair: its bundle, or why it failed."""
    from sensorveil.export import export_run  # the trainer's stack: only when a RUN_DIR is benchmarked
    from sensorveil.export.validate import ValidationError
    entries = []
    for fmt, precision in pairs:
        out = Path(bundles_dir) / f"{fmt}-{precision}"
        log(f"exporting {fmt} {precision} -> {out}")
        entry = {"format": fmt, "precision": precision, "bundle": str(out)}
        try:
            # int8's own privacy check uses the table's attacker, so both sides are comparable
            export_run(run_dir, fmt, out, precision=precision, attacker_epochs=attacker_epochs or None)
        except ValidationError as error:   # written, but it disagrees with torch: a row that says so
            entry.update(status="failed", reason=str(error))
        except Exception as error:   # a missing library, an unsupported operator: the row says which
            entry.update(status="failed", reason=_one_line(error), bundle=None)
        entries.append(entry)
    return entries


def _one_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".strip()


def measure_artefact_privacy(row: dict, bundle_dir, attacker_epochs: int) -> None:
    """The probing attack on this artefact's output, in place on ``row``. An int8 bundle's export
    already measured it (its validation record); otherwise evaluate_bundle runs it through the
    runtime. Without the training run or torch, the manifest's figures stay, marked so."""
    manifest = json.loads((Path(bundle_dir) / MANIFEST_NAME).read_text())
    for record in manifest.get("validation", []):
        if record.get("backend") == row["backend"] and "int8" in record and \
                record.get("attacker_epochs") == attacker_epochs:
            row.update({key: record["int8"][key] for key in PRIVACY_KEYS}, privacy_source="int8 validation")
            return
    if not attacker_epochs:
        return
    if importlib.util.find_spec("torch") is None:   # a board's runtime-only install (the sdk needs torch,
        row["privacy_note"] = "manifest figures (no torch here: the attackers train on the workstation)"
        return                                      # and new Pythons: importing it on 3.6 is a SyntaxError)
    try:
        from sensorveil.sdk.assess import evaluate_bundle
        figures = evaluate_bundle(bundle_dir, backend=row["backend"], attacker_epochs=attacker_epochs)
    except (ImportError, FileNotFoundError) as error:   # a device without torch, or the run is elsewhere
        row["privacy_note"] = f"manifest figures ({_one_line(error)})"
        return
    row.update({key: figures[key] for key in PRIVACY_KEYS}, privacy_source="measured")
    row["random_star"] = figures.get("random_star")


def failed_row(entry: dict) -> dict:
    return {"format": entry["format"], "precision": entry["precision"], "status": "failed",
            "reason": entry.get("reason"), "bundle": entry.get("bundle")}


# the runtime backends that run each format's artefact (a tensorrt bundle also carries its ONNX source,
# but its row is about the engine)
FORMAT_BACKENDS = {"onnx": ("onnxruntime",), "tflite": ("litert", "edgetpu"), "openvino": ("openvino",),
                   "tensorrt": ("tensorrt",)}


def measurable_backend(manifest: dict, fmt: str) -> "str | None":
    """The first of the format's backends that the bundle carries and this machine can run."""
    return next((name for name in FORMAT_BACKENDS[fmt] if name in manifest["artifacts"] and library_available(name)),
                None)


def not_measurable_reason(manifest: dict, fmt: str) -> str:
    """Why a written artefact cannot run here: its validation record's reason, or the missing library."""
    for record in manifest.get("validation", []):
        if record.get("backend") in FORMAT_BACKENDS[fmt] and record.get("status") == "skipped":
            return record.get("reason", "")
    return f"no {' or '.join(FORMAT_BACKENDS[fmt])} runtime on this machine"


def benchmark_formats(path, formats: "str | None" = "all", bundles_dir=None, iters: int = 500, warmup: int = 50,
                      attacker_epochs: int = DEFAULT_ATTACKER_EPOCHS, source: "str | None" = None,
                      stream_frames: int = 300, backend: str = "all", log=print) -> dict:
    """The whole table: a RUN_DIR is exported to ``formats``; a BUNDLE is one row per backend."""
    path = Path(path)
    if is_run_dir(path):
        bundles_dir = Path(bundles_dir or Path("bundles") / f"{path.name}-formats")
        entries = export_all(path, parse_formats(formats), bundles_dir, attacker_epochs, log)
    else:
        open_bundle(path)   # not a bundle (or a broken one): the runtime's one clear error, before any work
        entries = [{"bundle": str(path)}]
    rows, details = [], {}
    for entry in entries:
        if entry.get("bundle") is None:
            rows.append(failed_row(entry))
            continue
        manifest = json.loads((Path(entry["bundle"]) / MANIFEST_NAME).read_text())
        fmt = entry.get("format")
        chosen = measurable_backend(manifest, fmt) if fmt else backend
        if chosen is None:
            rows.append({**failed_row(entry), "status": entry.get("status", "exported"),
                         "reason": entry.get("reason") or not_measurable_reason(manifest, fmt)})
            continue
        log(f"measuring {entry['bundle']} on {chosen}")
        result = benchmark_bundle(entry["bundle"], backend=chosen, iters=iters, warmup=warmup, source=source,
                                  stream_frames=stream_frames)
        for row in result["rows"]:
            row.update(precision=row.get("precision") or entry.get("precision"), bundle=entry["bundle"],
                       format=fmt or row.get("format"))
            if entry.get("status") == "failed":   # the export's validation failed: say so, still measure
                row.update(status="failed", reason=entry["reason"])
            measure_artefact_privacy(row, entry["bundle"], attacker_epochs)
            rows.append(row)
        details = details or {key: value for key, value in result.items() if key != "rows"}
    return {**details, "source_path": str(path), "attacker_epochs": attacker_epochs,
            "formats": formats if is_run_dir(path) else None, "rows": rows,
            **({"bundles_dir": str(bundles_dir)} if is_run_dir(path) else {})}
