"""TensorRT adapter: builds the engine on the device on first load, caches it, runs it with
CUDA device buffers (cuda-python, or pycuda on boards such as the Jetson Nano whose CUDA 10.2
cuda-python does not support). No torch anywhere.

An engine is only valid for the GPU and the TensorRT version that built it, so the cache file
next to the bundle is keyed by both, plus the ONNX file's hash and the build settings:
``BUNDLE/engines/<gpu>-trt<version>-<precision>-<onnx sha>.engine``.
"""
import io
import os
import re
from pathlib import Path

import numpy as np
import tensorrt as trt

from sensorveil.runtime import engine_cache
from sensorveil.runtime.backends.base import Backend, IOSignature, io_signature_of
from sensorveil.runtime.backends.cpu_policy import DEFAULT_POLICY, SHARED, check_cpu_policy
from sensorveil.runtime.bundle import ENGINE_CACHE_DIR, Bundle
from sensorveil.runtime.errors import BackendUnavailableError
from sensorveil.runtime.onnx_scan import refuse_external_data

SETUP_HINT = "run sensorveil/devices/setup/<your board>.sh (jetson-nano, jetson-orin-nano or nvidia-gpu)"
LOGGER = trt.Logger(trt.Logger.WARNING)


# -- CUDA memory: one small interface over cuda-python or pycuda ---------------------------
class CudaPython:
    def __init__(self, blocking_sync: bool = False):
        try:
            from cuda.bindings import runtime as cudart  # cuda-python >= 12.6
        except ImportError:
            from cuda import cudart
        self.cudart = cudart
        # CUDA's default lets the host thread spin while the GPU works; blocking sync puts it to sleep,
        # leaving its core to the rest of the device. Only before the context exists: where another library
        # made it already, CUDA refuses, and the context keeps its flags (reported by describe()).
        self.blocking_sync = blocking_sync and self._set_blocking_sync()
        self.stream = self._check(cudart.cudaStreamCreate())

    def _set_blocking_sync(self) -> bool:
        flag = getattr(self.cudart, "cudaDeviceScheduleBlockingSync", 4)
        return int(self.cudart.cudaSetDeviceFlags(int(flag))[0]) == 0

    def _check(self, result):
        error, *values = result
        if int(error) != 0:
            raise BackendUnavailableError(f"CUDA call failed with {error}; is an NVIDIA GPU visible? {SETUP_HINT}")
        return values[0] if values else None

    def gpu_name(self) -> str:
        props = self._check(self.cudart.cudaGetDeviceProperties(0))
        return props.name.decode() if isinstance(props.name, bytes) else str(props.name)

    def alloc(self, nbytes: int) -> int:
        return int(self._check(self.cudart.cudaMalloc(nbytes)))

    def to_device(self, pointer: int, host: np.ndarray) -> None:
        kind = self.cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        self._check(self.cudart.cudaMemcpyAsync(pointer, host.ctypes.data, host.nbytes, kind, self.stream))

    def to_host(self, host: np.ndarray, pointer: int) -> None:
        kind = self.cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        self._check(self.cudart.cudaMemcpyAsync(host.ctypes.data, pointer, host.nbytes, kind, self.stream))

    def synchronize(self) -> None:
        self._check(self.cudart.cudaStreamSynchronize(self.stream))

    def stream_handle(self) -> int:
        return int(self.stream)

    def free(self, pointer: int) -> None:
        self.cudart.cudaFree(pointer)


class PyCuda:
    blocking_sync = False   # pycuda.autoinit makes the context with CUDA's default (spin, then yield)

    def __init__(self, blocking_sync: bool = False):
        import pycuda.autoinit  # noqa: F401  (creates the context on device 0)
        import pycuda.driver as driver
        self.driver = driver
        self.stream = driver.Stream()
        self.allocations = {}

    def gpu_name(self) -> str:
        return self.driver.Device(0).name()

    def alloc(self, nbytes: int) -> int:
        allocation = self.driver.mem_alloc(nbytes)
        self.allocations[int(allocation)] = allocation
        return int(allocation)

    def to_device(self, pointer: int, host: np.ndarray) -> None:
        self.driver.memcpy_htod_async(pointer, host, self.stream)

    def to_host(self, host: np.ndarray, pointer: int) -> None:
        self.driver.memcpy_dtoh_async(host, pointer, self.stream)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def stream_handle(self) -> int:
        return self.stream.handle

    def free(self, pointer: int) -> None:
        self.allocations.pop(pointer).free()


def cuda_memory(blocking_sync: bool = False):
    for make in (CudaPython, PyCuda):
        try:
            return make(blocking_sync)
        except ImportError:
            continue
    raise BackendUnavailableError("the tensorrt backend needs 'cuda-python' (pip install cuda-python) or 'pycuda' "
                                  f"for device buffers; {SETUP_HINT}")


# -- engine build and cache -----------------------------------------------------------------
class Int8Calibrator(trt.IInt8EntropyCalibrator2):
    """Feeds the bundle's calibration inputs (real training samples, model units) to TensorRT and
    keeps its calibration cache beside the engine, so a rebuild skips calibration."""

    def __init__(self, samples: np.ndarray, memory, cache_path: Path, batch: int = 1):
        # batch 1: the optimization profile's optimal shape, which calibration must use
        trt.IInt8EntropyCalibrator2.__init__(self)
        self.samples, self.memory, self.cache_path, self.batch = samples, memory, cache_path, batch
        self.position = 0
        self.pointer = memory.alloc(samples[:batch].nbytes)

    def get_batch_size(self):
        return self.batch

    def get_batch(self, names):
        if self.position + self.batch > len(self.samples):
            return None
        chunk = np.ascontiguousarray(self.samples[self.position:self.position + self.batch])
        self.memory.to_device(self.pointer, chunk)
        self.memory.synchronize()
        self.position += self.batch
        return [self.pointer]

    def read_calibration_cache(self):
        # only a cache this runtime wrote and recorded (engine_cache.py); TensorRT trusts what it reads here
        return engine_cache.read_recorded(self.cache_path) if os.path.lexists(str(self.cache_path)) else None

    def write_calibration_cache(self, cache):
        engine_cache.write_recorded(self.cache_path, bytes(cache), tensorrt=trt.__version__)


def engine_path(cache_dir: Path, gpu: str, build: dict, onnx_sha: str, calibration_sha: str = "") -> Path:
    """The cache file of an engine: every input that changes the built engine is in its name."""
    safe_gpu = re.sub(r"[^A-Za-z0-9]+", "-", gpu).strip("-").lower()
    settings = "b{}-w{}".format(int(build["max_batch"]), int(build["workspace_mb"]))
    calibrated = "-cal{}".format(calibration_sha[:8]) if calibration_sha else ""
    return cache_dir / "{}-trt{}-{}-{}-{}{}.engine".format(safe_gpu, trt.__version__, build["precision"], settings,
                                                           onnx_sha[:12], calibrated)


def set_workspace(config, nbytes: int) -> None:
    """TensorRT 8.4+ sets the workspace as a memory pool; 8.2 (JetPack 4.6) has only max_workspace_size."""
    if hasattr(config, "set_memory_pool_limit") and hasattr(trt, "MemoryPoolType"):
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, nbytes)
    else:
        config.max_workspace_size = nbytes


def build_engine(onnx_path: Path, onnx_bytes: bytes, build: dict, sample_shape: tuple,
                 calibration: "np.ndarray | None", memory, cache_dir: Path) -> bytes:
    """ONNX (the verified bytes; the path names it in messages) -> serialized engine with the bundle's
    build settings (precision, workspace, batch range)."""
    builder = trt.Builder(LOGGER)
    # TensorRT 10 networks are always explicit-batch (the flag is deprecated); 8.x needs it set
    major = int(trt.__version__.split(".")[0])
    explicit = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH) if major < 10 else 0
    network = builder.create_network(explicit)
    parser = trt.OnnxParser(network, LOGGER)
    if not parser.parse(onnx_bytes):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BackendUnavailableError(f"TensorRT {trt.__version__} cannot parse {onnx_path.name}: {errors}; "
                                      "run `sensorveil devices check BUNDLE --device NAME` for the offending operators")
    config = builder.create_builder_config()
    set_workspace(config, int(build["workspace_mb"]) << 20)
    if build["precision"] in ("fp16", "int8"):
        config.set_flag(trt.BuilderFlag.FP16)   # int8 layers fall back to fp16, not fp32
    if build["precision"] == "int8":
        config.set_flag(trt.BuilderFlag.INT8)
        config.int8_calibrator = Int8Calibrator(calibration, memory, cache_dir / "calibration.cache")
    profile = builder.create_optimization_profile()
    name = network.get_input(0).name
    profile.set_shape(name, (1, *sample_shape), (1, *sample_shape), (int(build["max_batch"]), *sample_shape))
    config.add_optimization_profile(profile)
    if build["precision"] == "int8":
        config.set_calibration_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BackendUnavailableError(f"TensorRT {trt.__version__} failed to build an engine for {onnx_path.name}")
    return bytes(serialized)


class TensorRTBackend(Backend):
    name = "tensorrt"

    def __init__(self, bundle: Bundle, graph: str = "model", cache_dir: "str | Path | None" = None,
                 rebuild: bool = False, cpu_policy: str = DEFAULT_POLICY):
        artifact = bundle.graph_artifact(self.name, graph)
        self.onnx_path = bundle.path(artifact["file"])
        self.build = artifact["build"]
        self.cpu_policy = check_cpu_policy(cpu_policy)
        self.memory = cuda_memory(blocking_sync=cpu_policy == SHARED)
        self.gpu = self.memory.gpu_name()
        # the engine cache is not part of the bundle's files (an engine is built for one GPU); it is the one
        # unlisted folder open_bundle lets a tensorrt bundle hold
        self.cache_dir = Path(cache_dir) if cache_dir else bundle.root / ENGINE_CACHE_DIR
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        engine_cache.check_cache_dir(self.cache_dir)   # open_bundle checked BUNDLE/engines; a cache_dir= too
        # a graph's own input shape (a decoder takes a latent); schema-1 bundles: the bundle input
        self.sample_shape = tuple(artifact.get("input_shape") or bundle.manifest["input"]["model_shape"][1:])
        sha = bundle.manifest["files"][artifact["file"]]["sha256"]
        calibration_sha = (bundle.manifest["files"].get(self.build["calibration"], {}).get("sha256", "")
                           if self.build["precision"] == "int8" else "")
        self.engine_file = engine_path(self.cache_dir, self.gpu, self.build, sha, calibration_sha)
        self.built_now = rebuild or not os.path.lexists(str(self.engine_file))
        if self.built_now:
            refuse_external_data(bundle.read(artifact["file"]), bundle.root, artifact["file"])
            calibration = (np.load(io.BytesIO(bundle.read(self.build["calibration"])), allow_pickle=False)
                           if self.build["precision"] == "int8" else None)
            engine_cache.write_recorded(self.engine_file, build_engine(
                self.onnx_path, bundle.read(artifact["file"]), self.build, self.sample_shape, calibration,
                self.memory, self.cache_dir), onnx_sha256=sha, tensorrt=trt.__version__, gpu=self.gpu)
        # the cached engine is read once, checked against the record written when it was built here, and
        # deserialized from those bytes. It is the device's own build output, outside the bundle's hashes and
        # signature: keep the cache folder writable by the service alone, or pass cache_dir= a folder that is
        self.engine = trt.Runtime(LOGGER).deserialize_cuda_engine(engine_cache.read_recorded(self.engine_file))
        self.context = self.engine.create_execution_context()
        self.max_batch = int(self.build["max_batch"])
        self.buffers = self._allocate()

    def _allocate(self) -> dict:
        """One device buffer per I/O tensor, sized for the largest batch of the profile; the output's
        size comes from the engine (PASS's head returns (batch, bank), not the input's shape)."""
        per_sample = int(np.prod(self.sample_shape)) * 4
        if hasattr(self.engine, "num_io_tensors"):             # TensorRT 8.5+: named I/O tensors
            names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
            self.output_name = next(n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT)
            self.input_name = next(n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT)
            output_shape = tuple(self.engine.get_tensor_shape(self.output_name))
        else:                                                 # TensorRT 8.2: bindings
            inputs = [self.engine.binding_is_input(i) for i in range(self.engine.num_bindings)]
            self.input_binding, self.output_binding = inputs.index(True), inputs.index(False)
            output_shape = tuple(self.engine.get_binding_shape(self.output_binding))
        output_per_sample = int(np.prod(output_shape[1:])) * 4
        return {"input": self.memory.alloc(per_sample * self.max_batch),
                "output": self.memory.alloc(output_per_sample * self.max_batch), "output_per_sample": output_per_sample}

    def run(self, batch: np.ndarray) -> np.ndarray:
        if len(batch) > self.max_batch:
            return np.concatenate([self.run(batch[i:i + self.max_batch]) for i in range(0, len(batch), self.max_batch)])
        batch = np.ascontiguousarray(batch, dtype=np.float32)
        out = np.empty((len(batch), self.buffers["output_per_sample"] // 4), dtype=np.float32)
        self.memory.to_device(self.buffers["input"], batch)
        if hasattr(self.context, "execute_async_v3"):       # TensorRT >= 8.5: named tensors
            self.context.set_input_shape(self.input_name, batch.shape)
            self.context.set_tensor_address(self.input_name, self.buffers["input"])
            self.context.set_tensor_address(self.output_name, self.buffers["output"])
            self.context.execute_async_v3(self.memory.stream_handle())
        else:                                                 # TensorRT 8.2 (JetPack 4.6): bindings
            bindings = [0] * self.engine.num_bindings
            bindings[self.input_binding], bindings[self.output_binding] = self.buffers["input"], self.buffers["output"]
            self.context.set_binding_shape(self.input_binding, batch.shape)
            self.context.execute_async_v2(bindings, self.memory.stream_handle())
        self.memory.to_host(out, self.buffers["output"])
        self.memory.synchronize()
        return out

    def io_signature(self) -> IOSignature:
        """The inputs' and outputs' names and shapes; a free dimension (-1) is None."""
        def shape(dims):
            return tuple(None if int(dim) < 0 else int(dim) for dim in dims)
        engine = self.engine
        if hasattr(engine, "num_io_tensors"):             # TensorRT 8.5+: named I/O tensors
            names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
            ports = [(name, shape(engine.get_tensor_shape(name)),
                      engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT) for name in names]
        else:                                             # TensorRT 8.2: bindings
            ports = [(engine.get_binding_name(i), shape(engine.get_binding_shape(i)), engine.binding_is_input(i))
                     for i in range(engine.num_bindings)]
        return io_signature_of([(name, dims) for name, dims, is_input in ports if is_input],
                               [(name, dims) for name, dims, is_input in ports if not is_input])

    def close(self) -> None:
        for key in ("input", "output"):
            self.memory.free(self.buffers[key])

    def describe(self) -> dict:
        return {"backend": self.name, "library_version": trt.__version__, "gpu": self.gpu,
                "precision": self.build["precision"], "engine": str(self.engine_file),
                "built_on_load": self.built_now, "model": self.onnx_path.name, "cpu_policy": self.cpu_policy,
                "host_sync": "blocking" if self.memory.blocking_sync else "spin"}
