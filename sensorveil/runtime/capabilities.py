"""The one table of what sensorveil exports and runs: format x backend x precision x extra x hardware.

The exporter's formats, precisions and missing-library hints, the runtime's backend packages, the
benchmark's ``--formats all``, the CLI's help and ``sensorveil devices formats`` and the README's table
are all read from CAPABILITIES (Ultralytics keeps one such table of export formats), so a new format or
backend is one row here plus its writer and adapter. It lives in the runtime because the runtime needs
it on a board and may not import the exporter; it is plain data that runs on Python 3.6.
"""
from collections import namedtuple

PRECISION_ORDER = ("fp32", "fp16", "int8")

Capability = namedtuple("Capability", [
    "format",                # sensorveil export --format
    "backend",               # the runtime backend that runs the file (Privatizer.load(backend=...))
    "precisions",            # what the exporter writes in this format for this backend
    "benchmarked",           # the precisions `sensorveil benchmark --formats all` measures
    "export_extra",          # pip extra of the workstation that writes it: pip install '.[EXTRA]'
    "export_modules",        # the Python modules its writer imports (a missing one names the extra)
    "runtime_package",       # the pip package the board runs it with
    "runtime_alternatives",  # other modules that provide the same library (Coral: tflite_runtime)
    "accelerator",           # "" where any CPU runs it, else the hardware it needs
    "note",                  # where it runs, for the README's table
    "adapter",               # "module:Class" of the runtime adapter that runs it (runtime.backends)
    "auto_rank",             # backend="auto" tries lower ranks first: the fastest accelerator first
    "writer",                # "module:function" of the exporter that writes the format (export side only)
    "detector_writer",       # "module:function" that writes a camera bundle's person detector for it
])

ONNX_MODULES = ("onnx", "onnxruntime", "onnxscript")
TFLITE_MODULES = ("litert_torch", "ai_edge_quantizer", "ai_edge_litert", "flatbuffers")

_BACKENDS = "sensorveil.runtime.backends."
_EXPORT = "sensorveil.export."
_DETECTOR = _EXPORT + "person_detector.writers:"
CAPABILITIES = (
    Capability("onnx", "onnxruntime", ("fp32", "int8"), ("fp32", "int8"), "onnx", ONNX_MODULES,
               "onnxruntime", (), "", "any CPU: x86-64, Raspberry Pi 4/5 (int8 as QDQ)",
               _BACKENDS + "onnxruntime_backend:OnnxRuntimeBackend", 5, _EXPORT + "formats:write_onnx",
               _DETECTOR + "onnx_detector"),
    Capability("tflite", "litert", ("fp32", "fp16", "int8"), ("fp32", "fp16", "int8"), "export-tflite",
               TFLITE_MODULES, "ai_edge_litert", ("tflite_runtime",), "", "any CPU: x86-64, Arm",
               _BACKENDS + "litert_backend:LiteRTBackend", 4, _EXPORT + "tflite_export:write_tflite",
               _DETECTOR + "tflite_detector"),
    Capability("tflite", "edgetpu", ("int8",), (), "export-tflite", TFLITE_MODULES, "ai_edge_litert",
               ("tflite_runtime",), "Coral Edge TPU", "USB or Dev Board; compiled at export",
               _BACKENDS + "edgetpu_backend:EdgeTPUBackend", 2, _EXPORT + "tflite_export:write_tflite",
               _DETECTOR + "edgetpu_detector"),
    Capability("openvino", "openvino", ("fp32", "fp16"), ("fp32", "fp16"), "openvino", ("openvino",),
               "openvino", (), "", "any CPU; NCS2 (fp16) with OpenVINO 2022.3",
               _BACKENDS + "openvino_backend:OpenVINOBackend", 3, _EXPORT + "openvino_export:write_openvino",
               _DETECTOR + "openvino_detector"),
    Capability("tensorrt", "tensorrt", ("fp32", "fp16", "int8"), ("fp16", "int8"), "onnx", ONNX_MODULES,
               "tensorrt", (), "NVIDIA GPU", "Jetson Nano/Orin; engine built on the board",
               _BACKENDS + "tensorrt_backend:TensorRTBackend", 1, _EXPORT + "tensorrt_export:write_tensorrt",
               _DETECTOR + "tensorrt_detector"),
)


def split_reference(reference: str) -> tuple:
    """"package.module:name" -> ("package.module", "name")."""
    module, _, name = reference.partition(":")
    return module, name


def auto_order_of_table() -> tuple:
    """Backends in the order backend="auto" tries them (the table's auto_rank)."""
    return tuple(row.backend for row in sorted(CAPABILITIES, key=lambda row: row.auto_rank))


def _ordered(values) -> tuple:
    return tuple(dict.fromkeys(values))


def formats() -> tuple:
    """Export formats in the table's order."""
    return _ordered(row.format for row in CAPABILITIES)


def backends() -> tuple:
    return _ordered(row.backend for row in CAPABILITIES)


def rows_for_format(fmt: str) -> list:
    return [row for row in CAPABILITIES if row.format == fmt]


def row_for_backend(backend: str) -> Capability:
    return next(row for row in CAPABILITIES if row.backend == backend)


def precisions_of(fmt: str) -> tuple:
    """Every precision the exporter writes in ``fmt``, in fp32, fp16, int8 order."""
    written = {p for row in rows_for_format(fmt) for p in row.precisions}
    return tuple(p for p in PRECISION_ORDER if p in written)


def benchmarked_precisions() -> dict:
    """format -> the precisions `benchmark --formats all` measures."""
    return {fmt: tuple(p for p in PRECISION_ORDER if any(p in row.benchmarked for row in rows_for_format(fmt)))
            for fmt in formats()}


def formats_writing(precision: str) -> tuple:
    return tuple(fmt for fmt in formats() if precision in precisions_of(fmt))


def extra_of_module() -> dict:
    """Python module a writer imports -> the extra that installs it."""
    return {module: row.export_extra for row in CAPABILITIES for module in row.export_modules}


def hardware_backends() -> tuple:
    return tuple(row.backend for row in CAPABILITIES if row.accelerator)


def format_help() -> str:
    """One line for --help: each format and the precisions it is exported in."""
    return "; ".join("{}: {}".format(fmt, ", ".join(precisions_of(fmt))) for fmt in formats())


def table_rows() -> list:
    """The table as text cells, one row per format and backend (``sensorveil devices formats``)."""
    return [[row.format, row.backend, ",".join(row.precisions), row.export_extra, row.runtime_package,
             row.accelerator or "no"] for row in CAPABILITIES]


TABLE_HEADER = ["format", "backend", "precisions", "export extra", "board package", "needs hardware"]


def markdown_table() -> str:
    """The README's table: the text table and where each row runs."""
    header = TABLE_HEADER + ["runs on"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells + [row.note]) + " |" for cells, row in zip(table_rows(), CAPABILITIES)]
    return "\n".join(lines)

