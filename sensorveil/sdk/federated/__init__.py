"""Federated training on Flower (``flwr``, extra ``federated``), for mechanisms learnt across devices that
never share raw data (TAPPFL, pass-federated). Flower does the federation; this package holds what every
such mechanism needs around it, one job per module:

* ``partitions``: the rows each simulated device holds (IID, Dirichlet over one attribute, one device per
  value of one).
* ``strategy``: the server strategies (Flower's FedAvg, FedMedian and FedTrimmedAvg, failing a round loudly
  when a sampled device errs or does not answer in time), and ``validation``: the checks on every device's
  update (a bad update is dropped and its device named).
* ``simulation``: Flower's simulation runtime in a child process with a wall-clock limit, its output in
  simulation.log; ``logs``: following a Flower process's output, and the one line that says why a run failed.
* ``processes``: the Flower processes of a deployment (``flwr run`` with a limit, ``LoopbackFederation``:
  a SuperLink and SuperNodes as real processes on 127.0.0.1), each stopped by its own process id.
* ``apps``: the ServerApp and ClientApp pair built from a mechanism's server loop and device handlers (every
  ClientApp carries the protections' mods), and the Flower App directory ``flwr run`` is given.
* ``privacy_options``: the settings for Flower's SecAgg+ (``secure_aggregation``) and client-side differential
  privacy, and their refusals; ``secure_aggregation`` and ``differential_privacy``: Flower's parts for each
  wired to the strict strategy; ``accountant``: the (epsilon, delta) the noise spends.

The names below are importable from ``sensorveil.sdk.federated`` itself; importing it never imports flwr.
"""
from sensorveil.sdk.federated.apps import flower_app_pair, simulation_pair, write_flower_app
from sensorveil.sdk.federated.logs import client_reason, failure_line
from sensorveil.sdk.federated.partitions import (
    dirichlet_partition,
    group_partition,
    partition_rows,
    partition_summary,
)
from sensorveil.sdk.federated.processes import (
    STOP_GRACE_S,
    TELEMETRY_OFF,
    FederationTimeout,
    LoopbackFederation,
    flower_environment,
    flower_executable,
    flwr_run,
    free_port,
    parse_run_id,
    sensorveil_root,
    stop_process,
    stop_run,
    wait_for_port,
)
from sensorveil.sdk.federated.simulation import SIMULATION_LOG, SPEC_FILE, ray_backend_config, simulate
from sensorveil.sdk.federated.validation import FederationError, UpdateLimits


def strict_fedavg_class():
    """StrictFedAvg (federated.strategy): FedAvg over validated updates, strict about failed devices."""
    from sensorveil.sdk.federated.strategy import strategy_class
    return strategy_class("fedavg")


__all__ = [
    "FederationError", "FederationTimeout", "LoopbackFederation", "SIMULATION_LOG", "SPEC_FILE", "STOP_GRACE_S",
    "TELEMETRY_OFF", "UpdateLimits", "client_reason", "dirichlet_partition", "failure_line", "flower_app_pair",
    "flower_environment", "flower_executable", "flwr_run", "free_port", "group_partition", "parse_run_id",
    "partition_rows", "partition_summary", "ray_backend_config", "sensorveil_root", "simulate", "simulation_pair",
    "stop_process", "stop_run", "strict_fedavg_class", "wait_for_port", "write_flower_app",
]
