"""Federated training on Flower (``flwr``, extra ``federated``), for mechanisms learnt across devices that
never share raw data (TAPPFL). Flower does the federation; this module only holds what every such
mechanism needs around it:

* ``partition_rows``: the rows each simulated device holds, IID or non-IID (Dirichlet over one
  attribute, Hsu et al. 2019): for every class k the shares of the M devices are drawn from Dir(alpha),
  so a small alpha gives each device few classes and a large alpha tends to IID.
* the server strategies live in ``federated_strategy`` (Flower's FedAvg, FedMedian and FedTrimmedAvg,
  failing a round loudly when a sampled device errs or does not answer in time) and the checks on
  every device's update in ``federated_validation`` (a bad update is dropped and its device named).
* ``simulate``: Flower's simulation runtime (``flwr.simulation.run_simulation``) in a child process
  with a wall-clock limit. A ClientApp that raises can leave a simulation waiting without a word, so
  past the limit the child's whole process group is stopped and ``FederationTimeout`` is raised.
* deployment: ``write_flower_app`` (a Flower App directory for ``flwr run``), ``flwr_run`` (with a
  limit) and ``LoopbackFederation`` (a SuperLink and SuperNodes as real processes on 127.0.0.1).

Every Flower process started here gets telemetry off (``FLWR_TELEMETRY_ENABLED=0``), the caller's
``FLWR_HOME``, and is stopped by its own process id (its process group) when it is done.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from sensorveil.sdk.federated_validation import FederationError

TELEMETRY_OFF = {"FLWR_TELEMETRY_ENABLED": "0"}
SPEC_FILE = "federation-spec.json"
STOP_GRACE_S = 10.0


class FederationTimeout(FederationError):
    """A federated run passed its wall-clock limit and was stopped."""


# -- partitions --------------------------------------------------------------------------------
def partition_rows(rows: np.ndarray, labels: np.ndarray, num_clients: int, scheme: str = "iid",
                   alpha: float = 0.5, seed: int = 0, min_size: int = 2) -> list[np.ndarray]:
    """The rows of each of ``num_clients`` devices. ``labels[i]`` is the class of ``rows[i]`` (the
    attribute a Dirichlet partition skews). Deterministic in ``seed``, so every Flower node computes
    the same partition and takes its own part."""
    rows, labels = np.asarray(rows), np.asarray(labels)
    if num_clients < 1 or len(rows) < num_clients * min_size:
        raise ValueError(f"{len(rows)} rows cannot give {num_clients} devices {min_size}+ rows each; "
                         "expected fewer devices or more data")
    rng = np.random.default_rng([seed, 1010])
    if scheme == "iid":
        return [np.sort(part) for part in np.array_split(rng.permutation(rows), num_clients)]
    if scheme == "dirichlet":
        if alpha <= 0:
            raise ValueError(f"the Dirichlet concentration alpha must be > 0, got {alpha}")
        return dirichlet_partition(rows, labels, num_clients, alpha, rng, min_size)
    if scheme == "groups":
        return group_partition(rows, labels, num_clients, min_size)
    raise ValueError(f"unknown partition {scheme!r}; expected 'iid', 'dirichlet' or 'groups'")


def group_partition(rows, labels, num_clients: int, min_size: int) -> list[np.ndarray]:
    """One device per value of ``labels`` (a user, a phone): the split the data itself has, so each device
    holds one person's or one phone's rows, as a deployment would."""
    groups = np.unique(labels)
    if len(groups) != num_clients:
        raise ValueError(f"the 'groups' partition gives one device per value: these rows hold {len(groups)} values, "
                         f"so expected clients={len(groups)}, got {num_clients}")
    parts = [np.sort(rows[labels == group]) for group in groups]
    small = [int(group) for group, part in zip(groups, parts) if len(part) < min_size]
    if small:
        raise ValueError(f"the 'groups' partition's values {small} hold fewer than {min_size} rows each; expected "
                         "every device to hold a few rows (use another attribute or the iid partition)")
    return parts


def dirichlet_partition(rows, labels, num_clients: int, alpha: float, rng, min_size: int,
                        attempts: int = 200) -> list[np.ndarray]:
    """Per class, split its rows among the devices in Dir(alpha) proportions; draw again (up to
    ``attempts`` times) until every device holds ``min_size`` rows, as Hsu et al. do."""
    for _ in range(attempts):
        parts = [[] for _ in range(num_clients)]
        for k in np.unique(labels):
            members = rng.permutation(rows[labels == k])
            cuts = (np.cumsum(rng.dirichlet(np.full(num_clients, alpha)))[:-1] * len(members)).astype(int)
            for part, chunk in zip(parts, np.split(members, cuts)):
                part.append(chunk)
        parts = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(p) for p in parts) >= min_size:
            return parts
    raise ValueError(f"no Dirichlet(alpha={alpha}) partition of {len(rows)} rows gives all {num_clients} devices "
                     f"{min_size}+ rows in {attempts} draws; expected a larger alpha or fewer devices")


def partition_summary(parts: list[np.ndarray], labels_of_rows: Callable[[np.ndarray], np.ndarray]) -> dict:
    """Sizes and class counts per device, for the run record."""
    sizes = [len(p) for p in parts]
    classes = [int(len(np.unique(labels_of_rows(p)))) for p in parts]
    return {"devices": len(parts), "rows_min": int(min(sizes)), "rows_median": float(np.median(sizes)),
            "rows_max": int(max(sizes)), "classes_per_device_mean": float(np.mean(classes))}


# -- the strategy (federated_strategy, federated_validation) -------------------------------------
def strict_fedavg_class():
    """StrictFedAvg (federated_strategy): FedAvg over validated updates, strict about failed devices."""
    from sensorveil.sdk.federated_strategy import strategy_class
    return strategy_class("fedavg")


# -- environment of every Flower process ---------------------------------------------------------
def sensorveil_root() -> str:
    """The directory that holds the sensorveil package, so Flower's own processes (ServerApp,
    ClientApp, Ray workers) import the same code whether or not sensorveil is installed."""
    import sensorveil
    return str(Path(sensorveil.__file__).resolve().parents[1])


def flower_environment(flwr_home=None, extra: dict | None = None) -> dict:
    env = {**os.environ, **TELEMETRY_OFF, **(extra or {})}
    if flwr_home is not None:
        env["FLWR_HOME"] = str(flwr_home)
    paths = [sensorveil_root()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # the SuperLink starts flower-superexec (and the SuperNode its ClientApp process) by name from PATH:
    # put this interpreter's bin first, so a venv that was never activated still finds its own Flower
    bins = [str(Path(sys.executable).parent)] + [p for p in env.get("PATH", "").split(os.pathsep) if p]
    env["PATH"] = os.pathsep.join(dict.fromkeys(bins))
    return env


def flower_executable(name: str) -> str:
    """flower-superlink, flower-supernode or flwr from this interpreter's environment."""
    candidate = Path(sys.executable).parent / name
    if candidate.is_file():
        return str(candidate)
    import shutil
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} not found beside {sys.executable} or on PATH; expected Flower installed "
                                "(pip install 'sensorveil[federated]')")
    return found


def stop_process(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> int:
    """Stop a process this module started, and its children, by its process id: the process was
    started in its own session, so its id is also its process group's id. SIGTERM, then SIGKILL."""
    if process.poll() is None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
    try:   # children that outlived the leader still hold its process group id
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return process.wait()


# -- simulation -------------------------------------------------------------------------------
def simulate(apps_factory: str, spec: dict, out_dir: Path, timeout_s: float, flwr_home=None) -> float:
    """Run Flower's simulation runtime on ``apps_factory`` ("module:function", called with ``spec``
    and returning (ServerApp, ClientApp)) in a child process; returns its wall time in seconds.
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
    started = time.time()
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_process(process)
        raise FederationTimeout(f"the Flower simulation ran past its limit of {timeout_s:.0f} s and was stopped "
                                f"(pid {process.pid}); a ClientApp that raised can leave Flower waiting, see the "
                                "log above") from None
    finally:
        stop_process(process)   # a finished simulation can leave Ray helpers in its process group
    if code != 0:
        raise FederationError(f"the Flower simulation exited with code {code}; see its log above")
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


# -- deployment: a Flower App directory, `flwr run`, a loopback federation ---------------------------
def write_flower_app(app_dir: Path, serverapp: str, clientapp: str, config: dict, name: str = "sensorveil-app") -> Path:
    """A Flower App directory (pyproject.toml) whose components live in sensorveil (installed on every
    machine of the federation) and whose run config is ``config``."""
    import tomli_w
    app_dir = Path(app_dir)
    app_dir.mkdir(parents=True, exist_ok=True)
    document = {"build-system": {"requires": ["hatchling"], "build-backend": "hatchling.build"},
                "project": {"name": name, "version": "1.0.0", "description": "sensorveil federated training",
                            "license": "Apache-2.0", "dependencies": []},
                "tool": {"flwr": {"app": {"publisher": "sensorveil",
                                          "components": {"serverapp": serverapp, "clientapp": clientapp},
                                          "config": config}}}}
    (app_dir / "pyproject.toml").write_text(tomli_w.dumps(document))
    return app_dir


def flwr_run(app_dir: Path, superlink: str, timeout_s: float, flwr_home=None, log_path: Path | None = None,
             echo: Callable[[str], bool] | None = None) -> str:
    """``flwr run APP SUPERLINK --stream``: submit the app to a running SuperLink and follow its logs to
    the end; lines for which ``echo(line)`` holds are printed as they come (progress per round). Past
    ``timeout_s`` the run is stopped on the SuperLink (``flwr stop``) and FederationTimeout raised.
    Returns everything flwr printed (also written to ``log_path``)."""
    env = flower_environment(flwr_home)
    command = [flower_executable("flwr"), "run", str(app_dir), superlink, "--stream"]
    started = time.time()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=_follow, args=(process.stdout, lines, echo), daemon=True)
    reader.start()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_process(process)
        reader.join(timeout=5)
        output = "".join(lines)
        _write_log(log_path, output)
        stop_run(parse_run_id(output), superlink, env)
        raise FederationTimeout(f"`flwr run` on {superlink} ran past its limit of {timeout_s:.0f} s and was stopped "
                                f"(its run on the SuperLink too){_tail(output)}") from None
    finally:
        stop_process(process)
    reader.join(timeout=5)
    output = "".join(lines)
    _write_log(log_path, output)
    if process.returncode != 0 or parse_run_id(output) is None:
        raise FederationError(f"`flwr run` on {superlink} failed (exit {process.returncode}) after "
                              f"{time.time() - started:.0f} s{_tail(output)}")
    return output


def _follow(stream, lines: list, echo) -> None:
    for line in stream:
        lines.append(line)
        if echo is not None and echo(line):
            print(line.rstrip(), flush=True)


def stop_run(run_id: str | None, superlink: str, env: dict) -> None:
    """Best effort: ask the SuperLink to stop a run whose `flwr run` was stopped."""
    if run_id is not None:
        subprocess.run([flower_executable("flwr"), "stop", run_id, superlink], env=env, capture_output=True,
                       timeout=60, check=False)


def _write_log(path, text: str) -> None:
    if path is not None:
        Path(path).write_text(text)


def _tail(output: str, chars: int = 2000) -> str:
    return f":\n{output[-chars:]}" if output else ""


def parse_run_id(output: str) -> str | None:
    marker = "Successfully started run "
    for line in output.splitlines():
        if marker in line:
            return line.split(marker, 1)[1].split()[0]
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, deadline: float, process: subprocess.Popen, what: str) -> None:
    while time.time() < deadline:
        if process.poll() is not None:
            raise FederationError(f"{what} exited with code {process.returncode} before listening on 127.0.0.1:{port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise FederationTimeout(f"{what} did not listen on 127.0.0.1:{port} in time")


@dataclass
class LoopbackFederation:
    """A SuperLink and ``len(node_configs)`` SuperNodes as real processes on 127.0.0.1 (every port
    bound to the loopback address, plain HTTP, telemetry off), registered in ``home``/config.toml as
    the SuperLink connection ``name``. Use as a context manager: leaving it stops every process it
    started, by process id, within ``STOP_GRACE_S`` per signal.

    The same commands, with real addresses and TLS, deploy across machines (README, TAPPFL)."""
    home: Path
    node_configs: list
    name: str = "loopback"
    start_timeout_s: float = 60.0
    processes: dict = field(default_factory=dict)
    port: int = 0

    def __enter__(self) -> "LoopbackFederation":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.home = Path(self.home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "{self.name}"\n\n[superlink.{self.name}]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n')
        deadline = time.time() + self.start_timeout_s
        link = self._spawn("superlink", [flower_executable("flower-superlink"), "--insecure", "--host", "127.0.0.1",
                                         "--port", str(self.port), "--disable-runtime-dependency-installation"])
        wait_for_port(self.port, deadline, link, "flower-superlink")
        for i, node_config in enumerate(self.node_configs):
            node_port = free_port()
            node = self._spawn(f"supernode-{i}", [
                flower_executable("flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{self.port}",
                "--host", "127.0.0.1", "--port", str(node_port), "--node-config", node_config,
                "--max-retries", "5", "--max-wait-time", "30"])
            wait_for_port(node_port, deadline, node, f"flower-supernode {i}")

    def _spawn(self, name: str, command: list) -> subprocess.Popen:
        log = open(self.home / f"{name}.log", "w")
        process = subprocess.Popen(command, env=flower_environment(self.home), stdout=log, stderr=subprocess.STDOUT,
                                   cwd=self.home, start_new_session=True)
        log.close()   # the child holds its own descriptor
        self.processes[name] = process
        return process

    def stop(self) -> dict:
        """Stop the SuperNodes, then the SuperLink; {name: exit code}."""
        codes = {}
        for name in sorted(self.processes, key=lambda n: n == "superlink"):
            codes[name] = stop_process(self.processes[name])
        return codes

    def run(self, app_dir: Path, timeout_s: float) -> str:
        return flwr_run(app_dir, self.name, timeout_s, flwr_home=self.home, log_path=self.home / "flwr-run.log")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "simulate":
        sys.exit("usage: python -m sensorveil.sdk.federated simulate MODULE:FACTORY SPEC.json")
    sys.exit(_simulate_main(sys.argv[2], sys.argv[3]))
