"""How a CPU backend behaves towards the rest of the device: ``cpu_policy``.

``"dedicated"`` (the default of ``Privatizer.load``): the libraries' own defaults, tuned for a machine
that runs nothing else. onnxruntime keeps its worker threads spinning between runs and sizes its pool to
every physical core; that wins a few percent when the cores are free, and costs CPU-time (and frames)
as soon as a camera app, a decoder or a trainer wants the same cores, because a spinning thread burns
the time slices another process needed and a parallel op waits for whichever of its threads was
descheduled.

``"shared"`` (the default of ``load_for_stream``): threads that sleep when they have no work and a pool
sized to leave cores for the rest of the device:

* onnxruntime: ``session.intra_op.allow_spinning`` and ``session.inter_op.allow_spinning`` = "0";
  ``intra_op_num_threads`` = ``shared_threads()`` unless the caller names ``threads``.
* OpenVINO (CPU): ``PERFORMANCE_HINT`` LATENCY, ``NUM_STREAMS`` 1, ``INFERENCE_NUM_THREADS``
  = ``shared_threads()`` unless given, and no pinning of its threads to cores.
* LiteRT / tflite-runtime: ``num_threads`` = ``shared_threads()`` unless given (its pool has no
  spinning switch).
* TensorRT: the host thread blocks on the GPU instead of spin-waiting (CUDA's blocking sync), where the
  CUDA context is still ours to configure.

Options an old library lacks (onnxruntime 1.10, OpenVINO 2022.3, tflite-runtime on the boards) are left
out rather than failing the load.
"""
import os

from sensorveil.runtime.errors import InputError

SHARED = "shared"
DEDICATED = "dedicated"
CPU_POLICIES = (SHARED, DEDICATED)
DEFAULT_POLICY = DEDICATED


def check_cpu_policy(policy) -> str:
    """The policy, or one InputError naming what was given and the choices."""
    if policy not in CPU_POLICIES:
        raise InputError("unknown cpu_policy {!r}; expected one of: {} ('shared': threads that sleep when idle, "
                         "sized to leave cores to other processes; 'dedicated': the libraries' defaults, for a "
                         "machine that runs nothing else)".format(policy, ", ".join(CPU_POLICIES)))
    return policy


def shared_threads(cores=None) -> int:
    """Threads for a model that shares the CPU: half the cores (at least one), so the rest of the device
    (decoder, camera app, the stream's read-ahead thread) keeps the other half."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // 2)


def policy_threads(policy: str, threads):
    """The thread count to configure: the caller's, else the policy's (None: the library's default)."""
    if threads:
        return threads
    return shared_threads() if policy == SHARED else None
