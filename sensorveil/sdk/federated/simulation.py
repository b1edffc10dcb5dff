"""Flower's simulation runtime (``flwr.simulation.run_simulation``) in a child process with a wall-clock
limit. A ClientApp that raises can leave a simulation waiting without a word, so past the limit the
child's whole process group is stopped and ``FederationTimeout`` is raised. The child is
``python -m sensorveil.sdk.federated simulate`` (this package's ``__main__``); what it prints goes to
``simulation.log`` in the run directory (progress lines echoed), and a failed run raises one line saying
why (federated.logs) and naming that file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from sensorveil.sdk.federated.logs import failure_message, log_note
from sensorveil.sdk.federated.processes import (
    FederationTimeout,
    flower_environment,
    start_followed,
    stop_process,
)
from sensorveil.sdk.federated.validation import FederationError

SPEC_FILE = "federation-spec.json"
SIMULATION_LOG = "simulation.log"


def simulate(apps_factory: str, spec: dict, out_dir: Path, timeout_s: float, flwr_home=None, echo=None) -> float:
    """Run Flower's simulation runtime on ``apps_factory`` ("module:function", called with ``spec``
    and returning (ServerApp, ClientApp)) in a child process; returns its wall time in seconds. Its
    output goes to ``out_dir``/simulation.log; lines for which ``echo(line)`` holds are printed too.
    Raises FederationTimeout past ``timeout_s`` and FederationError when the child exits badly."""
    out_dir = Path(out_dir)
    spec_path = out_dir / SPEC_FILE
    spec_path.write_text(json.dumps(spec, indent=2))
    home = Path(flwr_home or os.environ.get("FLWR_HOME") or out_dir / "flwr-home")
    home.mkdir(parents=True, exist_ok=True)
    # one BLAS thread per process: the simulation runs one ClientApp per CPU already
    # Ray's own switch for the behaviour its FutureWarning announces, so it stops printing it; TensorFlow's two
    # (Flower's Ray transport imports it where installed, computing nothing): its start-up lines filled every log
    quiet = {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}
    env = flower_environment(home, {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "RAY_DEDUP_LOGS": "0", **quiet})
    command = [sys.executable, "-m", "sensorveil.sdk.federated", "simulate", apps_factory, str(spec_path)]
    log_path = out_dir / SIMULATION_LOG
    started = time.time()
    process, lines, reader = start_followed(command, env, log_path, echo)
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_process(process)
        raise FederationTimeout(f"the Flower simulation ran past its limit of {timeout_s:.0f} s and was stopped "
                                f"(pid {process.pid}); a ClientApp that raised can leave Flower waiting"
                                f"{log_note(log_path)}") from None
    finally:
        stop_process(process)   # a finished simulation can leave Ray helpers in its process group
        reader.join(timeout=5)
    if code != 0:
        raise FederationError(failure_message(f"the Flower simulation exited with code {code}", "".join(lines),
                                              log_path))
    return time.time() - started


def ray_backend_config(cpus: int) -> dict:
    """One ClientApp per CPU, no dashboard, a small object store (the messages are small models).
    Ray's own services (GCS, raylet, workers) listen on every interface whatever ray.init is given
    (it resolves 127.0.0.1 to the machine's address); Flower itself opens no port in simulation."""
    return {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": int(cpus), "num_gpus": 0, "include_dashboard": False,
                          "object_store_memory": 256 * 1024 * 1024, "logging_level": "ERROR"}}


def _simulate_main(apps_factory: str, spec_path: str) -> int:
    """The child process of ``simulate``."""
    import importlib
    import logging

    spec = json.loads(Path(spec_path).read_text())
    module, _, name = apps_factory.partition(":")
    server_app, client_app = getattr(importlib.import_module(module), name)(spec)
    from flwr.simulation import run_simulation
    # progress comes from the ServerApp; Flower's warnings here concern choices made on purpose (run_simulation
    # rather than `flwr run`, which deployment uses; no federated evaluation), so only its errors show
    logging.getLogger("flwr").setLevel(logging.ERROR)
    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=int(spec["num_clients"]),
                   backend_config=ray_backend_config(int(spec.get("cpus", 2))))
    return 0
