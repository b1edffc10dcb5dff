"""Benchmark reports: JSON, Markdown, terminal table and an FPS bar chart."""
from __future__ import annotations

import json
import math
import os
import platform
import warnings
from pathlib import Path

import numpy as np


def cpu_description() -> dict:
    """CPU model name (Linux /proc/cpuinfo when present), arch, logical cores."""
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"model": model or "unknown", "machine": platform.machine(),
            "logical_cores": os.cpu_count()}


# ------------------------------------------------------------------ helpers
def _to_builtin(obj):
    """json.dump fallback for numpy scalars/arrays and paths."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def _columns(rows) -> list:
    """Union of row keys in first-seen order (rows may be heterogeneous)."""
    cols = {}
    for row in rows:
        cols.update(dict.fromkeys(row))
    return list(cols)


def _fmt(v) -> str:
    """Human formatting: ints with separators, floats with ~3-4 significant digits."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v == 0 or abs(v) >= 1e6 or abs(v) < 1e-3:
            return f"{v:.3g}"
        return f"{v:.1f}" if abs(v) >= 100 else f"{v:.3f}"
    return str(v)


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool)


def _cells(rows, cols):
    return [[_fmt(row.get(c)) for c in cols] for row in rows]


# ------------------------------------------------------------------- tables
def format_table(rows) -> str:
    """Plain-text table; numeric columns right-aligned, text left-aligned."""
    if not rows:
        return "(no rows)"
    cols = _columns(rows)
    cells = _cells(rows, cols)
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    numeric = [all(_is_number(r.get(c)) or r.get(c) is None for r in rows) for c in cols]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(cols), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def format_markdown(rows) -> str:
    """GitHub-flavoured Markdown table (pipes in values are escaped)."""
    if not rows:
        return "_no rows_\n"
    cols = _columns(rows)
    esc = lambda s: str(s).replace("|", r"\|")  # noqa: E731
    head = "| " + " | ".join(esc(c) for c in cols) + " |"
    align = "|" + "|".join("---:" if all(_is_number(r.get(c)) or r.get(c) is None
                                          for r in rows) else "---" for c in cols) + "|"
    body = ["| " + " | ".join(esc(v) for v in r) + " |" for r in _cells(rows, cols)]
    return "\n".join([head, align, *body]) + "\n"


def _markdown_document(results: dict) -> str:
    meta = {k: v for k, v in results.items() if k != "rows"}
    lines = ["# sensorveil benchmark", ""]
    for k, v in meta.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={_fmt(b)}" for a, b in v.items())
        lines.append(f"- **{k}**: {_fmt(v)}")
    return "\n".join(lines) + "\n\n" + format_markdown(results.get("rows", []))


# --------------------------------------------------------------------- plot
def _row_label(row, i) -> str:
    parts = [str(row[k]) for k in ("backend", "precision") if row.get(k) is not None]
    return "/".join(parts) or f"row {i}"


def _plot_fps(rows, path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")  # headless: CI and devices have no display
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn("matplotlib not installed; skipping FPS plot", RuntimeWarning)
        return False
    data = [(_row_label(r, i), float(r["fps"])) for i, r in enumerate(rows)
            if _is_number(r.get("fps"))]
    if not data:
        warnings.warn("no row has an 'fps' value; skipping FPS plot", RuntimeWarning)
        return False
    labels, fps = zip(*data)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(labels)), 3.5))
    try:
        ax.bar(range(len(fps)), fps, color="tab:blue")
        ax.set_xticks(range(len(fps)), labels, rotation=30, ha="right")
        ax.set_ylabel("frames / s")
        ax.set_title("Throughput per backend")
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)  # long benchmark sessions would otherwise leak figures
    return True


# ------------------------------------------------------------------- report
def write_report(results: dict, json_path=None, markdown_path=None, plot_path=None) -> dict:
    """Write whichever outputs are requested; returns {kind: path} written."""
    written = {}
    rows = results.get("rows", [])
    if json_path:
        Path(json_path).write_text(
            json.dumps(results, indent=2, default=_to_builtin) + "\n", encoding="utf-8")
        written["json"] = str(json_path)
    if markdown_path:
        Path(markdown_path).write_text(_markdown_document(results), encoding="utf-8")
        written["markdown"] = str(markdown_path)
    if plot_path and _plot_fps(rows, plot_path):
        written["plot"] = str(plot_path)
    return written
