"""Benchmark reports: the summary table (terminal and Markdown), JSON with every figure, and a plot
of latency distributions and privacy-utility points per artefact."""
import json
import math
import os
import platform
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


def cpu_text(cpu) -> str:
    """``cpu_description()`` as a page says it: "AMD EPYC, 2 logical cores"."""
    if isinstance(cpu, dict):
        return f"{cpu.get('model', '?')}, {cpu.get('logical_cores', '?')} logical cores"
    return str(cpu)


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
    meta = {k: v for k, v in results.items() if k not in ("rows", "estimates") and not isinstance(v, list)}
    lines = ["# sensorveil benchmark", "", summary_markdown(results), "## Every figure", ""]
    for k, v in meta.items():
        if isinstance(v, dict):   # attribute lists read as names; an unset figure says so
            v = ", ".join(f"{a}={attribute_names(b) if b is not None else 'not recorded'}"
                          for a, b in v.items() if not isinstance(b, dict))
        lines.append(f"- **{k}**: {_fmt(v)}")
    rows = [{k: v for k, v in row.items() if not isinstance(v, (list, dict))} for row in results.get("rows", [])]
    return "\n".join(lines) + "\n\n" + format_markdown(rows)


# ------------------------------------------------- the summary (Ultralytics' habit)
TABLE_WIDTH = 100
SUMMARY_COLUMNS = (   # header, width, right-aligned
    ("Format", 9, False), ("Precision", 9, False), ("Backend", 11, False), ("Status", 12, False),
    ("Size", 8, True), ("Private", 7, True), ("Useful", 6, True), ("p50 ms", 8, True), ("FPS", 8, True),
    ("Overhead", 8, True))


def _size(n) -> str:
    if not n:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _num(value, spec: str) -> str:
    return format(value, spec) if _is_number(value) else "-"


def summary_cells(row: dict, note: "int | None") -> "list[str]":
    status = row.get("status") or "-"
    overhead = row.get("overhead_p50")
    return [row.get("format") or "-", row.get("precision") or "-", row.get("backend") or "-",
            status + (f" [{note}]" if note else ""), _size(row.get("size_bytes")),
            _num(row.get("probing_acc_private"), ".3f") + ("*" if row.get("privacy_source") == "manifest" else ""),
            _num(row.get("probing_acc_useful"), ".3f"), _num(row.get("runtime_p50_ms"), ".3f"),
            _num(row.get("fps"), ",.0f"),
            f"{100 * overhead:+.0f}%" if _is_number(overhead) else "-"]


def summary_lines(result: dict) -> "tuple[list[list[str]], list[str]]":
    """(cells per row, numbered notes): a failed or unvalidated row's reason goes to a note."""
    cells, notes = [], []
    for row in result.get("rows", []):
        note = None
        if row.get("reason"):
            notes.append(f"{row.get('format')} {row.get('precision')}: {row['status']}: {row['reason']}")
            note = len(notes)
        cells.append(summary_cells(row, note))
    return cells, notes


def attribute_names(value) -> str:
    """['parity', 'lt5'] -> 'parity, lt5' (a list's repr in a label reads as noise)."""
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else _fmt(value)


def summary_footer(result: dict) -> "list[str]":
    """What each column means, the attacker's strength, and where the figures come from."""
    task = result.get("task") or {}
    metrics = result.get("metrics_at_export") or {}
    name = attribute_names
    epochs = result.get("attacker_epochs")
    rows = result.get("rows", [])
    lines = [f"Private: probing-attack accuracy on '{name(task.get('private'))}', on what each artefact emits "
             f"(lower is more private; Random* {_num(metrics.get('random_star'), '.3f')}). Useful: utility probe "
             f"on '{name(task.get('useful'))}' (higher is better)."]
    if any(row.get("privacy_source") in ("measured", "int8 validation") for row in rows):
        lines.append(f"Attackers trained {epochs} epochs (--attacker-epochs; `sensorveil evaluate` uses 20): "
                     "quick comparisons between formats, not audit figures.")
    if any(row.get("privacy_source") == "manifest" for row in rows):
        lines.append("*: the figures recorded in the manifest at export (the fp32 model), not measured on this "
                     "artefact here (--attacker-epochs 0, or the training run is not on this machine).")
    lines += backend_notes(result)
    lines.append("p50 ms: median batch-1 call through the runtime (validation, unit mapping, backend). FPS: calls "
                 "per second, 1000 / the mean call (slow calls count), the same figure as the JSON's 'fps' and the "
                 "quickstart's table. Overhead: the call's p50 over the bare backend's (a raw onnxruntime session "
                 "for onnx).")
    return lines


def backend_notes(result: dict) -> "list[str]":
    """Which backend ran each row and why it was chosen (auto names what it passed over), and each backend
    the bundle carries that did not run here, with the reason: a CPU figure never passes for an accelerator's."""
    ran = dict.fromkeys(f"{row['backend']}: {row['backend_why']}" for row in result.get("rows", [])
                        if row.get("backend") and row.get("backend_why"))
    lines = [f"Backend {text}." for text in ran]
    return lines + [f"Not run: {skipped['backend']}: {skipped['reason']}" for skipped in result.get("skipped", [])]


def format_summary(result: dict, width: int = TABLE_WIDTH) -> str:
    """The terminal table: one row per format and precision, at most ``width`` columns."""
    import textwrap
    cells, notes = summary_lines(result)
    widths = [max(w, len(h), *(len(c[i]) for c in cells)) if cells else max(w, len(h))
              for i, (h, w, _) in enumerate(SUMMARY_COLUMNS)]

    def line(values):
        return " ".join(v.rjust(w) if right else v.ljust(w)
                        for v, w, (_, _, right) in zip(values, widths, SUMMARY_COLUMNS)).rstrip()

    cpu = result.get("cpu") or {}
    task = result.get("task") or {}
    head = [f"sensorveil benchmark: {result.get('source_path') or result.get('bundle')} "
            f"({result.get('mechanism')}; input {result.get('input', {}).get('shape')} "
            f"{result.get('input', {}).get('dtype')}; useful {task.get('useful')}, private {task.get('private')})",
            f"CPU: {cpu.get('model', 'unknown')} ({cpu.get('logical_cores')} logical cores); batch 1, "
            f"{result.get('iters')} timed calls per row"]
    table = [line([h for h, _, _ in SUMMARY_COLUMNS]), " ".join("-" * w for w in widths)] + [line(c) for c in cells]
    wrap = lambda text, indent="": textwrap.wrap(text, width, subsequent_indent=indent)  # noqa: E731
    out = [piece for text in head for piece in wrap(text, "  ")] + [""] + table + [""]
    out += [piece for text in summary_footer(result) for piece in wrap(text)]
    out += [piece for i, text in enumerate(notes, 1) for piece in wrap(f"[{i}] {text}", "    ")]
    return "\n".join(out)


def summary_markdown(result: dict) -> str:
    """The same table as Markdown, for the .md report."""
    cells, notes = summary_lines(result)
    esc = lambda text: str(text).replace("|", r"\|")  # noqa: E731
    head = "| " + " | ".join(h for h, _, _ in SUMMARY_COLUMNS) + " |"
    align = "|" + "|".join("---:" if right else "---" for _, _, right in SUMMARY_COLUMNS) + "|"
    body = ["| " + " | ".join(esc(c) for c in row) + " |" for row in cells]
    text = "\n".join([head, align, *body]) + "\n\n" + "\n\n".join(summary_footer(result)) + "\n"
    return text + "".join(f"\n{i}. {esc(note)}" for i, note in enumerate(notes, 1)) + ("\n" if notes else "")


# --------------------------------------------------------------------- plot
def _row_label(row, i) -> str:
    parts = [str(row[k]) for k in ("format", "precision") if row.get(k) is not None]
    return " ".join(parts) or f"row {i}"


def _plot_benchmark(results: dict, path) -> "str | None":
    """Left: the latency distribution of each artefact; right: its privacy-utility point. Returns why no
    plot was drawn, or None when it was written."""
    try:
        import matplotlib
        matplotlib.use("Agg")  # headless: CI and devices have no display
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib)"
    rows = [(i, r) for i, r in enumerate(results.get("rows", [])) if r.get("runtime_samples_ms")]
    if not rows:
        return "no row has latency samples"
    labels = [_row_label(r, i) for i, r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    try:
        # box: quartiles and median; whiskers: 5th-95th percentile (a busy CPU's spikes would dwarf the rest)
        new_api = tuple(int(x) for x in matplotlib.__version__.split(".")[:2]) >= (3, 10)   # vert= is deprecated
        left.boxplot([r["runtime_samples_ms"] for _, r in rows], whis=(5, 95), showfliers=False,
                     **({"orientation": "horizontal"} if new_api else {"vert": False}))
        left.set_yticks(range(1, len(rows) + 1), labels)
        left.invert_yaxis()   # the table's order, top to bottom
        left.set_xscale("log")
        # a range under a decade gets labelled minor ticks that run into one another: label majors only,
        # in plain numbers
        from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
        left.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        left.xaxis.set_major_formatter(ScalarFormatter())
        left.xaxis.set_minor_formatter(NullFormatter())
        left.set_xlabel("batch-1 latency through the runtime (ms, log scale; whiskers p5-p95)")
        left.set_title("Latency per artefact")
        for i, r in rows:
            if _is_number(r.get("probing_acc_private")) and _is_number(r.get("probing_acc_useful")):
                right.scatter(r["probing_acc_private"], r["probing_acc_useful"], s=40,
                              marker="x" if r.get("status") == "failed" else "o")
                right.annotate(_row_label(r, i), (r["probing_acc_private"], r["probing_acc_useful"]),
                               textcoords="offset points", xytext=(5, 4), fontsize=8)
        random_star = (results.get("metrics_at_export") or {}).get("random_star")
        if _is_number(random_star):
            right.axvline(random_star, color="grey", linestyle="--", linewidth=1)
            right.annotate("Random*", (random_star, 0.02), xycoords=("data", "axes fraction"), fontsize=8,
                           color="grey", xytext=(3, 0), textcoords="offset points")
        task = results.get("task") or {}
        right.set_xlabel(f"probing attack on private '{attribute_names(task.get('private'))}' "
                         "(lower is more private)")
        right.set_ylabel(f"utility probe on '{attribute_names(task.get('useful'))}'")
        right.set_title("Privacy and utility per artefact (x: failed)")
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)  # long benchmark sessions would otherwise leak figures
    return None


# ------------------------------------------------------------------- report
def write_report(results: dict, json_path=None, markdown_path=None, plot_path=None) -> dict:
    """Write whichever outputs are requested; returns {kind: path} written, and 'plot_skipped': why, where a
    plot was asked for and not drawn (never announce a file that was not written)."""
    written = {}
    if json_path:
        Path(json_path).write_text(
            json.dumps(results, indent=2, default=_to_builtin) + "\n", encoding="utf-8")
        written["json"] = str(json_path)
    if markdown_path:
        Path(markdown_path).write_text(_markdown_document(results), encoding="utf-8")
        written["markdown"] = str(markdown_path)
    if plot_path:
        skipped = _plot_benchmark(results, plot_path)
        if skipped is None:
            written["plot"] = str(plot_path)
        else:
            written["plot_skipped"] = skipped
    return written
