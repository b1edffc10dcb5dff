#!/usr/bin/env python
"""A Flower SuperNode on the board's own software: one round of real federated training with a device
that runs inside the emulated Raspberry Pi 5 (docs/board_supernode.md).

    python scripts/board_supernode.py                  # writes docs/board_supernode.md and .json
    python scripts/board_supernode.py --cache DIR      # where the rootfs and the board's packages are kept

A SuperLink (TLS, SuperNode authentication) and two SuperNodes run on this machine on 127.0.0.1; a third
SuperNode runs in Debian bookworm arm64 (Raspberry Pi OS Bookworm's userland, Python 3.11) booted under
qemu-system-aarch64 (sensorveil_lab.arm64_board), and reaches the SuperLink through qemu's user-mode
network as 10.0.2.2, a name the SuperLink's certificate holds. The board's key is registered before it
boots; it trusts the federation's CA. pass-federated then trains one round on digits with three devices
through `flwr run`.

The board holds only its own rows: they are written before it boots, by the functions the trainer itself
uses to give each device its folder (same seed, same partition), into /sv/device on the board (its
--node-config data-path), as a testbed provisions a device; the script checks them against the folder
the trainer writes for that device. The board's Python packages are PyPI's aarch64 wheels, installed
here for it (pip install --target): flwr and its dependencies, and torch 2.10.0, PyPI's newest aarch64
torch that is a CPU build (from 2.11 on, PyPI's aarch64 torch is a CUDA build needing NVIDIA's CUDA
packages; a Pi would take download.pytorch.org's CPU wheel, which is not reachable here).

Needs debootstrap, qemu-system-arm and cpio (Debian packages); minutes under emulation (no KVM).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from sensorveil_lab.arm64_board import (
    GUEST_ADDRESS,
    HOST_FROM_GUEST,
    INITRD_SKIP,
    NETWORK_UP,
    arm64_rootfs,
    arm64_site,
    checkout_files,
    initramfs,
    network_modules,
    qemu_command,
    tools_missing,
    write_init,
)
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
MARK = "SENSORVEIL-BOARD"
# what the board's ClientApp imports (flwr, torch, numpy, cryptography) with torch's own dependencies listed,
# since torch goes in alone (arm64_board.arm64_site)
BOARD_PACKAGES = ["flwr==1.41.0", "numpy", "filelock", "typing-extensions>=4.10.0", "sympy>=1.13.3",
                  "networkx>=2.5.1", "jinja2", "fsspec>=0.8.5"]
BOARD_TORCH = ["torch==2.10.0"]
HOST_NODES, BOARD_PARTITION = 2, 2     # partitions 0 and 1 here, 2 on the board
TASK = {"dataset": "digits", "useful": "parity", "private": "lt5"}
SETTINGS = {"clients": HOST_NODES + 1, "rounds": 1, "local_epochs": 1, "substitutes": 128, "embedding_dim": 32,
            "progress": True, "federation": "deployment"}
BEAT_S = 30.0
# a Pi 5's core: PyPI's aarch64 torch dies of an illegal instruction on the Cortex-A72 (ARMv8.0) a Pi 4 has
BOARD_CPU = "cortex-a76"
# A SuperNode gives the ClientApp process it starts Flower's heartbeat interval (30 s) to send its first heartbeat,
# else the task's token expires and the task is handed out again; importing Flower alone takes the emulated board
# about 100 s, so the board's copy of Flower waits this long instead (a Pi starts one in seconds).
BOARD_HEARTBEAT_S = 600

BOARD_JOB = """set -u
echo "{mark} booted $(cut -d' ' -f1 /proc/uptime)"
echo "{mark} python $(python3 -c 'import platform; print(platform.python_version(), platform.machine())')"
for module in {modules}; do insmod /sv/modules/$module || echo "{mark} failed insmod $module"; done
sleep 2   # eth0 appears once virtio_net has bound the card
python3 /sv/network_up.py {guest} && echo "{mark} network {guest}"
export PATH=/sv/site/bin:$PATH PYTHONPATH=/sv/site:/sv/src FLWR_TELEMETRY_ENABLED=0 HOME=/root
python3 -c 'import time, importlib.metadata as m; t = time.time()
import torch, flwr, sensorveil.sdk.mechanisms.pass_federated_parts.apps
print("{mark} imports", round(time.time() - t, 1), "torch", torch.__version__, "flwr", m.version("flwr"))'
echo "{mark} supernode $(cut -d' ' -f1 /proc/uptime)"
flower-supernode --root-certificates /sv/ca.crt --auth-supernode-private-key /sv/board.key \\
    --superlink {host}:{port} --max-retries 2 --max-wait-time 20 \\
    --node-config 'partition-id={partition} num-partitions={devices} data-path="/sv/device"'
echo "{mark} supernode-exit $?"
echo "{mark} done"
"""


class Board:
    """qemu running the board's job: its console followed into a list and a log file, marked lines printed
    and kept with the second (since boot started) they arrived."""

    def __init__(self, command: list, log: Path):
        self.started = time.time()
        self.marks: dict = {}
        self.lines: list = []
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.reader = threading.Thread(target=self._follow, args=(log,), daemon=True)
        self.reader.start()

    def _follow(self, log: Path) -> None:
        with open(log, "w") as out:
            for raw in self.process.stdout:
                line = raw.decode(errors="replace").rstrip("\r\n")
                self.lines.append(line)
                out.write(line + "\n")
                out.flush()
                if line.startswith(MARK + " "):
                    key, _, value = line[len(MARK) + 1:].strip().partition(" ")
                    self.marks[key] = {"value": value, "at_s": round(time.time() - self.started, 1)}
                    print(f"[board] {time.time() - self.started:5.0f} s: {key} {value}", flush=True)

    def last_line(self) -> str:
        shown = [line for line in self.lines[-20:] if line.strip()]
        return re.sub(r"\x1b\[[0-9;]*m", "", shown[-1])[-120:] if shown else "(nothing yet)"

    def finish(self, grace_s: float) -> bool:
        """Wait for the board to power off; True if it did, else it is stopped (by its process id)."""
        from sensorveil.sdk.federated.processes import stop_process
        try:
            self.process.wait(timeout=grace_s)
            powered_off = True
        except subprocess.TimeoutExpired:
            powered_off = False
        stop_process(self.process)
        self.reader.join(timeout=10)
        return powered_off


def board_rows(config, where: Path) -> Path:
    """Every device's folder, written by the trainer's own functions (pass-federated's federated_data,
    partitions, write_device_folders) with the run's settings; the board's folder is copied onto the board,
    the others are dropped."""
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.mechanisms.pass_federated_parts.device import partitions
    from sensorveil.sdk.mechanisms.pass_federated_parts.federation import federated_data
    from sensorveil.sdk.mechanisms.pass_federated_parts.folders import device_folder, write_device_folders
    data = load_dataset(TASK["dataset"])
    pdata, plan = federated_data(data, [TASK["useful"]], [TASK["private"]], [], config)
    task = {"partition_by": config.partition_by, "clients": config.clients, "partition": config.partition,
            "alpha": config.alpha, "seed": config.seed}
    folders = write_device_folders(where, pdata, partitions(pdata, task, plan.device_rows))
    for folder in folders:
        if folder != device_folder(where, BOARD_PARTITION):
            shutil.rmtree(folder)
    return device_folder(where, BOARD_PARTITION)


def board_stage(stage: Path, site: Path, rootfs: Path, certs: dict, key: Path, rows: Path, port: int) -> None:
    """/init and /sv of the board: its packages, this checkout, the network modules, the CA, its own key and
    rows, and the job."""
    sv = stage / "sv"
    shutil.copytree(site, sv / "site", copy_function=os.link, ignore=shutil.ignore_patterns(".complete"))
    patch_heartbeat(sv / "site")
    checkout_files(ROOT, sv / "src")
    modules = network_modules(rootfs, sv / "modules")
    (sv / "network_up.py").write_text(NETWORK_UP)
    shutil.copy2(certs["ca"], sv / "ca.crt")
    shutil.copy2(key, sv / "board.key")
    shutil.copytree(rows, sv / "device")
    # debootstrap's first stage leaves /etc/passwd unwritten, and torch asks for its user's name (getpass)
    (stage / "etc").mkdir(parents=True, exist_ok=True)
    (stage / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (stage / "etc" / "group").write_text("root:x:0:\n")
    write_init(stage, BOARD_JOB.format(mark=MARK, modules=" ".join(modules), guest=GUEST_ADDRESS,
                                       host=HOST_FROM_GUEST, port=port, partition=BOARD_PARTITION,
                                       devices=SETTINGS["clients"]))


def patch_heartbeat(site: Path) -> None:
    """The board's flwr/common/constant.py with HEARTBEAT_DEFAULT_INTERVAL = BOARD_HEARTBEAT_S, written as a new file
    (the site is hard links to the cached one) without its compiled copy."""
    constant = site / "flwr" / "common" / "constant.py"
    text = constant.read_text()
    patched = re.sub(r"^HEARTBEAT_DEFAULT_INTERVAL = \d+$", f"HEARTBEAT_DEFAULT_INTERVAL = {BOARD_HEARTBEAT_S}", text,
                     flags=re.M)
    if patched == text:
        raise RuntimeError(f"{constant} has no HEARTBEAT_DEFAULT_INTERVAL line to set: Flower changed")
    constant.unlink()
    constant.write_text(patched)
    for compiled in (constant.parent / "__pycache__").glob("constant.*.pyc"):
        compiled.unlink()


def online_nodes(federation) -> int:
    from sensorveil.sdk import federated
    listed = subprocess.run([federated.flower_executable("flwr"), "supernode", "list", federation.name],
                            env=federated.flower_environment(federation.home), capture_output=True, text=True,
                            timeout=120, check=False)
    return listed.stdout.count("online")


class Heartbeat:
    """A progress line every BEAT_S seconds while the run lasts: the phase and the board's last console line;
    it also checks the trainer's folder for the board's partition against the board's copy, once written."""

    def __init__(self, board: Board, trainer_folder: Path, board_folder: Path):
        self.board, self.phase, self.stopped = board, "booting", threading.Event()
        self.trainer_folder, self.board_folder, self.rows_match = trainer_folder, board_folder, None
        threading.Thread(target=self._beat, daemon=True).start()

    def _beat(self) -> None:
        last = time.time()
        while not self.stopped.wait(2.0):
            if self.rows_match is None and (self.trainer_folder / "rows.npz").is_file():
                self.rows_match = same_rows(self.trainer_folder, self.board_folder)
            if time.time() - last >= BEAT_S:
                last = time.time()
                print(f"[board] {time.time() - self.board.started:5.0f} s: {self.phase}; board console: "
                      f"{self.board.last_line()}", flush=True)


def same_rows(trainer_folder: Path, board_folder: Path) -> bool:
    from sensorveil.sdk.mechanisms.pass_federated_parts.folders import read_device_folder
    for _ in range(5):   # the trainer renames its file into place; read it whole
        try:
            mine, theirs = read_device_folder(board_folder), read_device_folder(trainer_folder)
            return mine.keys() == theirs.keys() and all(np.array_equal(mine[k], theirs[k]) for k in mine)
        except (OSError, ValueError):
            time.sleep(1)
    return False


def run_federation(args, cache: Path, work: Path, site: Path, rootfs: Path) -> dict:
    """SuperLink and two SuperNodes here, the board's SuperNode under qemu, one round; the figures."""
    from sensorveil.sdk import federated
    from sensorveil.sdk.federated.certs import LOOPBACK_HOSTS, write_certificates, write_node_keys
    from sensorveil.sdk.mechanisms.pass_federated_parts.config import PassFederatedConfig
    from sensorveil.sdk.runs import read_run, train_run
    home, run_dir = work / "flwr-home", work / "run"
    os.environ["FLWR_HOME"] = str(home)
    certs = write_certificates(work / "certs", hosts=(*LOOPBACK_HOSTS, HOST_FROM_GUEST))
    keys = [private for private, _ in write_node_keys(work / "keys", ["node-0", "node-1", "board"])]
    nodes = [f'partition-id={i} num-partitions={SETTINGS["clients"]} data-path="{run_dir / "devices" / f"device-{i}"}"'
             for i in range(HOST_NODES)]
    figures: dict = {}
    with federated.LoopbackFederation(home, nodes, tls=certs, node_keys=keys[:HOST_NODES]) as federation:
        config = PassFederatedConfig(**SETTINGS, superlink=federation.name, timeout_s=args.timeout_s,
                                     round_timeout_s=args.timeout_s)
        rows = board_rows(config, work / "provisioned")
        federation.register(f"{keys[2]}.pub")
        stage = work / "stage"
        board_stage(stage, site, rootfs, certs, keys[2], rows, federation.port)
        print(f"[board] SuperLink on 127.0.0.1:{federation.port} (TLS, SuperNode authentication), "
              f"{HOST_NODES} SuperNodes here; packing the board's initramfs ...", flush=True)
        initrd = initramfs(rootfs, stage, work / "initrd.cpio", skip=(*INITRD_SKIP, "./sv/site/torch/include"))
        figures["initramfs_mb"] = round(initrd.stat().st_size / 2**20)
        command = qemu_command(rootfs, initrd, memory_mb=args.memory_mb, network=True, cpu=BOARD_CPU)
        board = Board(command, work / "console.log")
        beat = Heartbeat(board, run_dir / "devices" / f"device-{BOARD_PARTITION}", rows)
        try:
            beat.phase = "booting; waiting for the board's SuperNode to join"
            figures["joined_s"] = wait_for_board(board, federation, args.timeout_s)
            beat.phase = "training one round (the board's ClientApp runs under emulation)"
            started = time.time()
            train_run("pass-federated", TASK["dataset"], useful=TASK["useful"], private=TASK["private"],
                      out=run_dir, attacker_epochs=1, config=config)
            figures["train_run_s"] = round(time.time() - started, 1)
        finally:
            beat.phase = "stopping the federation; waiting for the board to power off"
            federation.stop()
            figures["powered_off"] = board.finish(grace_s=60)
            beat.stopped.set()
    figures["rows_match_trainer"] = beat.rows_match
    figures["board"] = board.marks
    figures["run"] = read_run(run_dir)["federation"]
    figures["board_rows"] = int(len(np.load(rows / "rows.npz")["x"]))
    figures["board_log"] = board_log_facts(board.lines, home / "superlink.log")
    return figures


def wait_for_board(board: Board, federation, timeout_s: float) -> float:
    """Seconds from boot until the SuperLink lists all three SuperNodes online."""
    deadline = board.started + timeout_s
    while time.time() < deadline:
        if board.process.poll() is not None:
            raise RuntimeError(f"the board powered off before its SuperNode joined; last line: {board.last_line()}")
        if "supernode" in board.marks and online_nodes(federation) >= SETTINGS["clients"]:
            return round(time.time() - board.started, 1)
        time.sleep(5)
    raise TimeoutError(f"the board's SuperNode did not join within {timeout_s:.0f} s")


def board_log_facts(lines: list, superlink_log: Path) -> dict:
    """What the board's own SuperNode log says (its node ID, the messages it received, its error lines), and
    whether the SuperLink's log shows that node activated, with its registered key."""
    text = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in lines]
    ids = [line.split("SuperNode ID:", 1)[1].strip() for line in text if "SuperNode ID:" in line]
    link = superlink_log.read_text(errors="replace") if superlink_log.is_file() else ""
    return {"node_id": ids[0] if ids else None,
            "activated_on_superlink": bool(ids) and f"Activated node_id={ids[0]}" in link,
            "received": [line.split(":", 1)[-1].strip() for line in text if "Receiving:" in line][:10],
            "errors": [line for line in text if "ERROR" in line][:10]}


def results_of(figures: dict, site_s: float) -> dict:
    marks = figures["board"]
    python, _, arch = marks.get("python", {}).get("value", "? ?").partition(" ")
    imports = marks.get("imports", {}).get("value", "").split()
    rounds = figures["run"].get("rounds", [])
    first = rounds[0] if rounds else {}
    return {
        "board": {"python": python, "arch": arch, "userland": "Debian bookworm arm64 (Raspberry Pi OS Bookworm's "
                  f"base) under qemu-system-aarch64 -M virt -cpu {BOARD_CPU} -smp 2",
                  "torch": imports[2] if len(imports) > 2 else None, "flwr": imports[4] if len(imports) > 4 else None,
                  "rows": figures["board_rows"], "rows_match_trainer": figures["rows_match_trainer"],
                  "network": marks.get("network", {}).get("value"), "log": figures["board_log"],
                  "flower_heartbeat_s": BOARD_HEARTBEAT_S},
        "federation": {"superlink": "127.0.0.1 on this machine, TLS (server certificate for localhost, 127.0.0.1, "
                       f"{HOST_FROM_GUEST}), SuperNode authentication (registered EC keys)",
                       "supernodes_here": HOST_NODES, "supernodes_on_board": 1, "mechanism": "pass-federated",
                       "task": TASK, "settings": SETTINGS, "rows_per_device": figures["run"]["partition"].get(
                           "rows_per_device"),
                       "rounds": rounds, "flower": figures["run"].get("flower")},
        "joined": "supernode" in marks and figures.get("joined_s") is not None,
        "round_completed": bool(first) and first.get("devices") == SETTINGS["clients"] and not first.get("dropped"),
        "seconds": {"board_packages_here": round(site_s, 1),
                    "boot_to_job": marks.get("booted", {}).get("at_s"),
                    "boot_to_network": marks.get("network", {}).get("at_s"),
                    "imports_on_board": float(imports[0]) if imports else None,
                    "boot_to_supernode_start": marks.get("supernode", {}).get("at_s"),
                    "boot_to_joined": figures.get("joined_s"),
                    "round_flwr_run": figures["run"].get("wall_seconds"),
                    "train_run_with_evaluation": figures.get("train_run_s")},
        "initramfs_mb": figures["initramfs_mb"],
        "powered_off": figures["powered_off"],
    }


def markdown(results: dict) -> str:
    board, fed, seconds = results["board"], results["federation"], results["seconds"]
    first = (fed["rounds"] or [{}])[0]
    lines = [
        "# A SuperNode on the board's own software (emulated Raspberry Pi 5)",
        "",
        page_header(recorded(results)),
        "",
        "A Flower SuperLink runs on this machine on 127.0.0.1 with TLS and SuperNode authentication; "
        f"{fed['supernodes_here']} SuperNodes run here and one inside the emulated board, which reaches the "
        f"SuperLink through qemu's user-mode network as {HOST_FROM_GUEST} (a name the server certificate holds) "
        "with its own registered key. pass-federated trains one round on digits "
        f"(useful `{TASK['useful']}`, private `{TASK['private']}`) with `flwr run`.",
        "",
        "| | |",
        "|---|---|",
        f"| board | {board['userland']} |",
        f"| board's Python | {board['python']} on {board['arch']} |",
        f"| board's packages | torch {board['torch']}, flwr {board['flwr']} (PyPI's aarch64 wheels) |",
        f"| board's node joined the SuperLink | {yes(results['joined'])}, {seconds['boot_to_joined']} s after "
        "qemu started |",
        f"| round completed with the board's update aggregated | {yes(results['round_completed'])}: round "
        f"{first.get('round', '-')}, {first.get('devices', '-')} of {first.get('sampled', '-')} sampled devices "
        f"aggregated, dropped {first.get('dropped', '-')} |",
        f"| the board's rows | {board['rows']} rows, its own partition only (/sv/device); the same as the "
        f"trainer's folder for that device: {yes(board['rows_match_trainer'])} |",
        f"| rows per device | {fed['rows_per_device']} (the board holds device {BOARD_PARTITION}) |",
        f"| the board's SuperNode | ID {board['log']['node_id']}; activated on the SuperLink with its registered "
        f"key: {yes(board['log']['activated_on_superlink'])}; messages it received: "
        f"{'; '.join(board['log']['received']) or 'none'}; error lines in its log: {len(board['log']['errors'])} |",
        "",
        "Wall times (seconds; under emulation without KVM, so they say the code runs, not how fast a Pi is):",
        "",
        "| phase | seconds |",
        "|---|---|",
        f"| installing the board's packages here (pip install --target; 0 when cached) | "
        f"{seconds['board_packages_here']} |",
        f"| qemu start to the board's job (kernel, {results['initramfs_mb']} MB initramfs unpacked) | "
        f"{seconds['boot_to_job']} |",
        f"| qemu start to the board's network up | {seconds['boot_to_network']} |",
        f"| importing torch, flwr and the ClientApp on the board | {seconds['imports_on_board']} |",
        f"| qemu start to the SuperNode started | {seconds['boot_to_supernode_start']} |",
        f"| qemu start to the node online on the SuperLink | {seconds['boot_to_joined']} |",
        f"| the round (`flwr run`, all three devices) | {seconds['round_flwr_run']} |",
        f"| the whole train run (the round, then the run's evaluation here) | {seconds['train_run_with_evaluation']} |",
        "",
        "## How the board gets its rows and its software",
        "",
        "- Rows: before the board boots, the trainer's own functions (pass-federated's `federated_data`, "
        "`partitions`, `write_device_folders`, same settings and seed) write every device's folder; only the "
        f"board's (device {BOARD_PARTITION}) goes onto the board, as /sv/device, named by its SuperNode's "
        "`--node-config data-path`. The script compares it with the folder the trainer writes for that device "
        "during the run (row above). No other row is on the board.",
        "- Software: Debian bookworm's python3 (3.11), and PyPI's aarch64 wheels installed here for the board "
        "(`pip install --target`, console scripts pointed at the board's python3); this checkout as /sv/src. "
        "torch is 2.10.0: PyPI's aarch64 torch from 2.11 on is a CUDA build that needs NVIDIA's CUDA packages "
        "(libtorch_cuda.so), and download.pytorch.org's CPU builds are not reachable here.",
        "- One change to Flower on the board: its `HEARTBEAT_DEFAULT_INTERVAL` is "
        f"{board['flower_heartbeat_s']} s instead of 30 s. A SuperNode gives the ClientApp process it starts that long "
        "to send a first heartbeat, else the task's token expires and the task is handed out again; importing "
        "Flower alone takes the emulated board far longer (the import row above), a Pi seconds. The SuperLink and "
        "the SuperNodes here run Flower unchanged.",
        "- Network: virtio-net on virtio-mmio (Debian's virtio_mmio, failover, net_failover and virtio_net "
        "modules carried in the initramfs); the rootfs has no `ip`, so the board sets its address "
        f"({GUEST_ADDRESS}/24) with the ioctls `ip` uses.",
        "",
        "Rerun: `python scripts/board_supernode.py` (needs debootstrap, qemu-system-arm, cpio; "
        "`pytest -m board tests/lab/test_board_supernode.py` runs it end to end).",
        "",
    ]
    return "\n".join(lines)


def yes(flag) -> str:
    return "yes" if flag else "no"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "sensorveil-matrix"),
                        help="the rootfs and the board's packages (shared with scripts/device_matrix.py)")
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="limit of the board's join and of the round")
    parser.add_argument("--memory-mb", type=int, default=6144, help="the board's memory (its initramfs lives there)")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    args = parser.parse_args()
    allow_dirty = args.allow_dirty or Path(args.docs).resolve() != ROOT / "docs"
    require_clean(allow_dirty)
    record = provenance(allow_dirty=allow_dirty)
    missing = tools_missing("debootstrap", "qemu-system-aarch64", "cpio", "dpkg-deb")
    if missing:
        raise SystemExit(f"needs {', '.join(missing)} (Debian packages debootstrap, qemu-system-arm, cpio)")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    print("[board] the rootfs and the board's packages ...", flush=True)
    rootfs = arm64_rootfs(cache)
    started = time.time()
    site = arm64_site(cache, "site-bookworm-arm64-supernode", BOARD_PACKAGES, BOARD_TORCH)
    site_s = time.time() - started
    work = cache / "board-supernode"   # kept until the next run: the console and Flower's logs
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    figures = run_federation(args, cache, work, site, rootfs)
    results = {"command": record["command"], "timestamp": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", **results_of(figures, site_s),
               "provenance": record}
    results = portable(results, shared=SHARED, folders={str(cache.resolve()): "<cache>"})
    docs = Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "board_supernode.json").write_text(json.dumps(results, indent=2))
    (docs / "board_supernode.md").write_text(markdown(results))
    print(f"[board] joined: {results['joined']}, round completed: {results['round_completed']}; wrote "
          f"{docs / 'board_supernode.md'}", flush=True)
    if not (results["joined"] and results["round_completed"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
