"""The Flower processes a federation starts and supervises: the environment every one gets (telemetry off,
``FLWR_TELEMETRY_ENABLED=0``, the caller's ``FLWR_HOME``, this interpreter's sensorveil and Flower), ``flwr_run``
(``flwr run`` against a SuperLink, with a limit) and ``LoopbackFederation`` (a SuperLink and SuperNodes as
real processes on 127.0.0.1). Every process started here is stopped by its own process id (its process
group) when it is done."""
from __future__ import annotations

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

from sensorveil.sdk.federated.logs import failure_line, failure_message, follow, log_note, one_line
from sensorveil.sdk.federated.validation import FederationError

TELEMETRY_OFF = {"FLWR_TELEMETRY_ENABLED": "0"}
STOP_GRACE_S = 10.0
SERVERAPP_RAISED = "ServerApp raised an exception"   # Flower's log line; `flwr run` still exits 0


class FederationTimeout(FederationError):
    """A federated run passed its wall-clock limit and was stopped."""


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

# -- `flwr run` and a loopback federation --------------------------------------------------------

def start_followed(command: list, env: dict, log_path: Path, echo: bool) -> tuple:
    """(process, lines, reader) of ``command`` started in its own session, its output followed into ``lines`` and
    ``log_path`` by a reader thread (logs.follow)."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=follow, args=(process.stdout, lines, log_path, echo), daemon=True)
    reader.start()
    return process, lines, reader


def flwr_run(app_dir: Path, superlink: str, timeout_s: float, flwr_home=None, log_path: Path | None = None,
             echo: Callable[[str], bool] | None = None) -> str:
    """``flwr run APP SUPERLINK --stream``: submit the app to a running SuperLink and follow its logs to
    the end, into ``log_path``; lines for which ``echo(line)`` holds are printed as they come (progress per
    round). Past ``timeout_s`` the run is stopped on the SuperLink (``flwr stop``) and FederationTimeout
    raised. A run whose ServerApp raised (`flwr run` itself exits 0 then) or whose `flwr run` failed raises
    FederationError with one line: why (a failed round names its devices), and the log file.
    Returns everything flwr printed."""
    env = flower_environment(flwr_home)
    command = [flower_executable("flwr"), "run", str(app_dir), superlink, "--stream"]
    started = time.time()
    process, lines, reader = start_followed(command, env, log_path, echo)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_process(process)
        reader.join(timeout=5)
        output = "".join(lines)
        stop_run(parse_run_id(output), superlink, env)
        raise FederationTimeout(f"`flwr run` on {superlink} ran past its limit of {timeout_s:.0f} s and was stopped "
                                f"(its run on the SuperLink too){log_note(log_path)}") from None
    finally:
        stop_process(process)
    reader.join(timeout=5)
    output = "".join(lines)
    what = (f"the ServerApp of `flwr run` on {superlink} failed" if SERVERAPP_RAISED in output else
            f"`flwr run` on {superlink} exited with code {process.returncode}")
    what += f" after {time.time() - started:.0f} s"
    if process.returncode != 0 or parse_run_id(output) is None or SERVERAPP_RAISED in output:
        raise FederationError(failure_message(what, output, log_path))
    return output


def stop_run(run_id: str | None, superlink: str, env: dict) -> None:
    """Best effort: ask the SuperLink to stop a run whose `flwr run` was stopped."""
    if run_id is not None:
        subprocess.run([flower_executable("flwr"), "stop", run_id, superlink], env=env, capture_output=True,
                       timeout=60, check=False)


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
    bound to the loopback address, telemetry off), registered in ``home``/config.toml as the SuperLink
    connection ``name``. Use as a context manager: leaving it stops every process it started, by process
    id, within ``STOP_GRACE_S`` per signal.

    Plain HTTP unless ``tls`` is given (federated.certs.write_certificates' paths: the SuperLink serves
    its certificate, the SuperNodes and ``flwr`` trust the CA). ``node_keys``: one SuperNode private key
    per node (federated.certs.write_node_keys; its public key beside it as KEY.pub): the SuperLink then
    authenticates SuperNodes (``--enable-supernode-auth``) and each public key is registered with
    ``flwr supernode register`` before its node starts. The same commands, with real addresses, deploy
    across machines (docs/guides/mechanisms.md)."""
    home: Path
    node_configs: list
    name: str = "loopback"
    start_timeout_s: float = 60.0
    processes: dict = field(default_factory=dict)
    port: int = 0
    tls: dict | None = None
    node_keys: list | None = None

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
        if self.node_keys is not None and len(self.node_keys) != len(self.node_configs):
            raise ValueError(f"{len(self.node_keys)} node keys for {len(self.node_configs)} nodes: expected one each")
        self.home = Path(self.home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        trust = f'root-certificates = "{Path(self.tls["ca"]).resolve()}"' if self.tls else "insecure = true"
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "{self.name}"\n\n[superlink.{self.name}]\n'
            f'address = "127.0.0.1:{self.port}"\n{trust}\n')
        deadline = time.time() + self.start_timeout_s
        secure = (["--ssl-ca-certfile", str(self.tls["ca"]), "--ssl-certfile", str(self.tls["certificate"]),
                   "--ssl-keyfile", str(self.tls["key"])] if self.tls else ["--insecure"])
        auth = ["--enable-supernode-auth"] if self.node_keys is not None else []
        link = self._spawn("superlink", [flower_executable("flower-superlink"), *secure, *auth, "--host", "127.0.0.1",
                                         "--port", str(self.port), "--disable-runtime-dependency-installation"])
        wait_for_port(self.port, deadline, link, "flower-superlink")
        for i, node_config in enumerate(self.node_configs):
            key = None
            if self.node_keys is not None:
                key = self.node_keys[i]
                self.register(f"{key}.pub")
            node = self.start_node(f"supernode-{i}", node_config, key)
            wait_for_port(node.listen_port, deadline, node, f"flower-supernode {i}")

    def start_node(self, name: str, node_config: str, key=None, retries: int = 5) -> subprocess.Popen:
        """One more SuperNode, its output in ``home``/NAME.log, connecting as this federation's nodes do
        (``key``: its private key, for a SuperLink that authenticates nodes); the port it listens on is
        the process's ``listen_port``."""
        node_port = free_port()
        secure = ["--root-certificates", str(self.tls["ca"])] if self.tls else ["--insecure"]
        auth = ["--auth-supernode-private-key", str(key)] if key is not None else []
        node = self._spawn(name, [
            flower_executable("flower-supernode"), *secure, *auth, "--superlink", f"127.0.0.1:{self.port}",
            "--host", "127.0.0.1", "--port", str(node_port), "--node-config", node_config,
            "--max-retries", str(retries), "--max-wait-time", "30"])
        node.listen_port = node_port
        return node

    def register(self, public_key) -> str:
        """``flwr supernode register PUBLIC_KEY``: the SuperLink accepts the node holding its private key."""
        done = subprocess.run([flower_executable("flwr"), "supernode", "register", str(public_key), self.name],
                              env=flower_environment(self.home), capture_output=True, text=True, timeout=60,
                              check=False)
        if done.returncode != 0:
            raise FederationError(f"`flwr supernode register {public_key}` failed (exit {done.returncode}): "
                                  f"{failure_line(done.stdout + done.stderr) or one_line(done.stderr)[-300:]}")
        return done.stdout

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
