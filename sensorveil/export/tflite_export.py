"""torch -> LiteRT (.tflite) through litert-torch, no TensorFlow. fp32, fp16 and full-integer int8.

* fp32: ``litert_torch.convert`` of the exporter's model (static batch 1: the Edge TPU needs
  static shapes and the runtime feeds frames one at a time anyway).
* fp16: weights stored as float16 and dequantized at load (ai-edge-quantizer float casting),
  the LiteRT equivalent of TFLite's float16 post-training quantization.
* int8: static quantization of weights and activations by ai-edge-quantizer, calibrated on
  ``--calibration N`` real training samples; then the float input/output are replaced by int8
  ones (TFLite's modify_model_interface, as TF's inference_input_type=int8 does), which is what
  the Edge TPU needs. ``edgetpu_compiler`` runs when it is on PATH and the compiled file is listed;
  otherwise the bundle says the model is not compiled and carries the command that compiles, lists and
  re-signs it on a machine that has the compiler (``sensorveil devices compile``, edgetpu_compile.py).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

from sensorveil.export.edgetpu_compile import (
    COMPILER,
    compiled_entry,
    compiler_available,
    next_step,
    run_compiler,
    uncompiled_entry,
)
from sensorveil.export.heartbeat import Heartbeat

FP32_FILE, FP16_FILE, INT8_FILE = "model_fp32.tflite", "model_fp16.tflite", "model_int8.tflite"
DEFAULT_CALIBRATION = 200

# TensorFlow's and absl's C++ logging (oneDNN notices, op counts, "log messages before InitializeLog")
# flood the terminal once litert-torch loads them; they are read at library load, so set before that
for _variable, _value in (("TF_CPP_MIN_LOG_LEVEL", "3"), ("GLOG_minloglevel", "2"), ("TF_ENABLE_ONEDNN_OPTS", "0")):
    os.environ.setdefault(_variable, _value)
# import-time warnings of litert-torch's dependencies that say nothing about the export: torchao's CUDA
# kernels that a CPU machine cannot load, torch's notice about an Enum a dependency registers
for _logger in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_logger).setLevel(logging.ERROR)

def _progress(line: str) -> None:
    """Export progress on stderr, as the exporter's other steps print theirs."""
    print(line, file=sys.stderr, flush=True)


CALIBRATION_CHUNK = 50      # samples per calibration call: one progress line each
# the quantizer's interpreter threads during calibration; its default of 16 oversubscribes a small machine
CALIBRATION_THREADS = max(1, min(4, os.cpu_count() or 1))


@contextlib.contextmanager
def _quiet():
    """litert-torch and the quantizer print progress bars and MLIR timings; keep the CLI readable."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        previous = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(previous)


def convert_fp32(model: torch.nn.Module, example: np.ndarray, path: Path) -> Path:
    import litert_torch
    with Heartbeat(f"{path.name}: converting with litert-torch"), _quiet():
        edge_model = litert_torch.convert(model.eval(), (torch.from_numpy(example[:1]),))
        edge_model.export(str(path))
    return path


def _signature_input(model_path: Path) -> tuple[str, str]:
    from ai_edge_litert.interpreter import Interpreter
    signatures = Interpreter(model_path=str(model_path)).get_signature_list()
    key = next(iter(signatures))
    return key, signatures[key]["inputs"][0]


def quantize_fp16(float_path: Path, path: Path) -> Path:
    from ai_edge_quantizer import qtyping, quantizer, recipe_manager
    from ai_edge_quantizer.algorithm_manager import AlgorithmName
    manager = recipe_manager.RecipeManager()
    manager.add_weight_only_config(regex=".*", operation_name=qtyping.TFLOperationName.ALL_SUPPORTED, num_bits=16,
                                   algorithm_key=AlgorithmName.FLOAT_CASTING)
    with Heartbeat(f"{path.name}: float16 weights"), _quiet():
        quantizer.Quantizer(str(float_path), manager.get_quantization_recipe()).quantize().export_model(
            str(path), overwrite=True)
    return path


def quantize_int8(float_path: Path, calibration: np.ndarray, path: Path) -> Path:
    """Full-integer: int8 weights (per channel) and activations (per tensor), int8 I/O."""
    from ai_edge_litert import _pywrap_modify_model_interface as interface
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_quantizer import quantizer, recipe
    signature, input_name = _signature_input(float_path)
    q = quantizer.Quantizer(str(float_path), recipe.static_wi8_ai8())
    float_io = path.with_name(path.stem + "_float_io.tflite")
    stats = calibrate(q, signature, input_name, calibration)
    with Heartbeat(f"{path.name}: int8 quantization"), _quiet():
        q.quantize(stats).export_model(str(float_io), overwrite=True)
        inline_buffers(float_io)
        status = interface.modify_model_interface(str(float_io), str(path), schema.TensorType.INT8,
                                                  schema.TensorType.INT8)
    float_io.unlink()
    if status != 0:
        raise RuntimeError(f"could not give {path.name} int8 inputs/outputs (modify_model_interface status {status})")
    return path


def calibrate(q, signature: str, input_name: str, calibration: np.ndarray, log=None):
    """The quantizer's min/max statistics over every calibration sample, in chunks that resume from the
    previous chunk's result, with a progress line per chunk. The quantizer's own bar counts samples x
    operators (14 operators x 200 samples read as a 2,800-step bar) and its interpreter defaulted to 16
    threads on a 2-core machine; both are replaced here."""
    stats, total = None, len(calibration)
    with Heartbeat("int8 calibration", log) as beat:     # its lines bypass the stderr silenced below
        for start in range(0, total, CALIBRATION_CHUNK):
            chunk = calibration[start:start + CALIBRATION_CHUNK]
            with _quiet(), contextlib.redirect_stderr(io.StringIO()):
                stats = q.calibrate({signature: [{input_name: sample[None]} for sample in chunk]},
                                    previous_calibration_result=stats, num_threads=CALIBRATION_THREADS)
            beat.say(f"int8 calibration: {start + len(chunk)} of {total} samples")
    return stats


def inline_buffers(path: Path) -> Path:
    """Rewrite a .tflite whose constant buffers sit after the flatbuffer (the quantizer does this for
    models of a few hundred kB and more, e.g. PASS's embedding with its bank) into the classic layout
    with every buffer inside. modify_model_interface predates buffer offsets and silently drops such
    buffers, which left an int8 model that would not load ("Constant buffer specified an out of range
    offset")."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema
    raw = path.read_bytes()
    model = schema.ModelT.InitFromPackedBuf(raw, 0)
    outside = [buffer for buffer in model.buffers or [] if buffer.offset and buffer.offset > 1]
    if not outside:
        return path
    for buffer in outside:
        buffer.data = np.frombuffer(raw[buffer.offset:buffer.offset + buffer.size], dtype=np.uint8)
        buffer.offset = buffer.size = 0
    builder = flatbuffers.Builder(len(raw) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    path.write_bytes(builder.Output())
    return path


def compile_for_edgetpu(out_dir: Path, model_file: str, final_dir: "Path | None" = None) -> tuple:
    """The 'edgetpu' artifact of one graph: compiled and listed when edgetpu_compiler is here; else marked
    not compiled, with the command that compiles, lists and re-signs it later (edgetpu_compile.py). The
    command names ``final_dir``, where the bundle lands (``out_dir`` is the folder beside it that the export
    writes in and renames into place)."""
    shared = {"format": "tflite", "precision": "int8"}
    bundle_dir = Path(final_dir) if final_dir is not None else out_dir
    if not compiler_available():
        _progress(f"{model_file}: not compiled for the Edge TPU here ({COMPILER} is not on PATH); the bundle "
                  f"records the next step: {next_step(bundle_dir)} [--sign KEY], on an x86-64 Linux host with "
                  f"{COMPILER}")
        return shared, uncompiled_entry(model_file, bundle_dir)
    compiled, output = run_compiler(out_dir, model_file, _progress)
    return shared, compiled_entry(model_file, compiled, output)


def write_tflite(job) -> dict:
    out = job.out_dir
    float_path = convert_fp32(job.module, job.samples, out / job.file(FP32_FILE))
    shared = {"format": "tflite", "converter": "litert-torch", "static_batch": 1, "precision": job.precision}
    if job.precision == "fp32":
        return {"litert": (shared, {"file": float_path.name})}
    if job.precision == "fp16":
        fp16_path = quantize_fp16(float_path, out / job.file(FP16_FILE))
        float_path.unlink()
        return {"litert": ({**shared, "weights": "float16"}, {"file": fp16_path.name})}
    calibration = job.calibration()
    calibration_file = job.file("calibration_inputs.npy")
    np.save(out / calibration_file, calibration, allow_pickle=False)
    int8_path = quantize_int8(float_path, calibration, out / job.file(INT8_FILE))
    float_path.unlink()
    artifacts = {"litert": ({**shared, "io_dtype": "int8"},
                            {"file": int8_path.name,
                             "calibration": {"file": calibration_file, "samples": int(len(calibration)),
                                             "drawn_from": "training split"}})}
    if job.target and job.target.get("backend") == "edgetpu":
        artifacts["edgetpu"] = compile_for_edgetpu(out, int8_path.name, job.final_dir)
    return artifacts
