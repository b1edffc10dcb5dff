"""An emulated Raspberry Pi 5's software: Debian bookworm arm64 (Raspberry Pi OS Bookworm's userland, Python
3.11) booted under qemu-system-aarch64 with the rootfs as its initramfs. scripts/device_matrix.py runs the
runtime there; scripts/board_supernode.py a Flower SuperNode.

The pieces: the rootfs (debootstrap stage one, cached), PyPI's aarch64 wheels for it (a folder pip reads on
the board, or a folder installed here for the board with ``pip install --target``), the initramfs (rootfs +
a stage folder holding /init and /sv), the boot, and the job's marked console lines."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

DEBIAN_MIRROR = "http://deb.debian.org/debian"
ARM64_PACKAGES = "python3,python3-venv,python3-pip,linux-image-arm64,ca-certificates"
GLIBC_TAGS = [f"manylinux_2_{minor}_aarch64" for minor in (17, 27, 28, 31, 34, 35, 36)] + ["manylinux2014_aarch64"]
# left out of the initramfs: the kernel's modules (a board job that needs one carries it in its stage) and
# what nobody reads
INITRD_SKIP = ("./lib/modules", "./usr/lib/modules", "./boot", "./var/cache/apt/archives", "./usr/share/doc",
               "./usr/share/man", "./usr/share/locale")
# virtio-mmio's network card and what virtio_net needs, in load order (Debian builds them as modules;
# virtio and virtio_ring are built in)
NETWORK_MODULES = ("kernel/drivers/virtio/virtio_mmio.ko", "kernel/net/core/failover.ko",
                   "kernel/drivers/net/net_failover.ko", "kernel/drivers/net/virtio_net.ko")
# qemu's user-mode network: the guest's address, and the host's loopback as the guest reaches it
GUEST_ADDRESS, HOST_FROM_GUEST = "10.0.2.15", "10.0.2.2"

BOARD_INIT = """#!/bin/sh
# PID 1 of the emulated board: mount the kernel's file systems, run the job, power off
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
sh /sv/job.sh > /dev/console 2>&1
echo o > /proc/sysrq-trigger
sleep 30
"""

# The rootfs has no iproute2 or busybox: the board brings lo and eth0 up and gives eth0 its address with
# the ioctls `ip` itself uses. 10.0.2.2 is on eth0's /24, so no route is needed to reach the host.
NETWORK_UP = """import fcntl, socket, struct, sys
SIOCGIFFLAGS, SIOCSIFFLAGS, SIOCSIFADDR, SIOCSIFNETMASK, IFF_UP = 0x8913, 0x8914, 0x8916, 0x891C, 0x1
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def up(name):
    flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sh22x", name, 0))[:18])[1]
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh22x", name, flags | IFF_UP))
def address(name, request, dotted):
    fcntl.ioctl(s, request, struct.pack("16sH2x4s8x", name, socket.AF_INET, socket.inet_aton(dotted)))
up(b"lo")
address(b"eth0", SIOCSIFADDR, sys.argv[1])
address(b"eth0", SIOCSIFNETMASK, "255.255.255.0")
up(b"eth0")
"""


def tools_missing(*tools: str) -> "list[str]":
    return [tool for tool in tools if shutil.which(tool) is None]


def arm64_rootfs(cache: Path) -> Path:
    """Stage one of debootstrap (download and unpack, no arm64 code runs), then every fetched package
    unpacked over it: the packages stay unconfigured, which a Python userland does not notice."""
    rootfs = cache / "bookworm-arm64"
    if (rootfs / ".complete").is_file():
        return rootfs
    shutil.rmtree(rootfs, ignore_errors=True)
    subprocess.run(["debootstrap", "--foreign", "--arch", "arm64", "--variant=minbase",
                    f"--include={ARM64_PACKAGES}", "bookworm", str(rootfs), DEBIAN_MIRROR],
                   check=True, stdout=subprocess.DEVNULL, timeout=1800)
    for deb in sorted((rootfs / "var/cache/apt/archives").glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(rootfs)], check=True)
    (rootfs / ".complete").write_text(time.strftime("%Y-%m-%d"))
    return rootfs


def aarch64_pip(*args: str) -> list:
    """pip choosing PyPI's binary wheels for the board (CPython 3.11, glibc aarch64) instead of this machine's."""
    platforms = [arg for tag in GLIBC_TAGS for arg in ("--platform", tag)]
    return [sys.executable, "-m", "pip", *args, "-q", "--only-binary=:all:", *platforms, "--python-version", "3.11",
            "--implementation", "cp"]


def arm64_wheels(cache: Path, wheels: list, name: str = "wheels-bookworm-arm64") -> Path:
    """``wheels`` (requirements) and their dependencies as aarch64 wheel files, for pip on the board."""
    folder = cache / name
    stamp = folder / ".complete"
    if not (stamp.is_file() and stamp.read_text() == " ".join(wheels)):   # a changed list fetches anew
        subprocess.run(aarch64_pip("download", "-d", str(folder), *wheels), check=True, timeout=1800)
        stamp.write_text(" ".join(wheels))
    return folder


def arm64_site(cache: Path, name: str, requirements: list, without_dependencies: list = ()) -> Path:
    """A site-packages folder for the board, installed here (``pip install --target``): unpacking under
    emulation would take longer than the job. ``without_dependencies`` are installed alone: pip evaluates
    environment markers against this machine, so torch's ``platform_machine == "x86_64"`` CUDA packages
    would otherwise be pulled for an aarch64 board that cannot use them. Console scripts run the board's
    python3."""
    folder = cache / name
    stamp = folder / ".complete"
    wanted = " ".join([*requirements, "--no-deps", *without_dependencies])
    if stamp.is_file() and stamp.read_text() == wanted:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run(aarch64_pip("install", "--target", str(folder), *requirements), check=True, timeout=1800)
    if without_dependencies:
        subprocess.run(aarch64_pip("install", "--no-deps", "--target", str(folder), *without_dependencies),
                       check=True, timeout=1800)
    for script in (folder / "bin").glob("*"):
        lines = script.read_bytes().split(b"\n", 1)
        if lines[0].startswith(b"#!") and b"python" in lines[0]:
            script.write_bytes(b"#!/usr/bin/python3\n" + (lines[1] if len(lines) > 1 else b""))
    stamp.write_text(wanted)
    return folder


def network_modules(rootfs: Path, dest: Path) -> list:
    """NETWORK_MODULES copied into ``dest``; the names, in the order the board loads them."""
    release = sorted((rootfs / "lib/modules").iterdir())[-1]
    dest.mkdir(parents=True, exist_ok=True)
    for module in NETWORK_MODULES:
        shutil.copy2(release / module, dest / Path(module).name)
    return [Path(module).name for module in NETWORK_MODULES]


def checkout_files(root: Path, dest: Path) -> None:
    """The checkout as a clone on the board holds it (tracked files and new ones not ignored), not its runs
    or caches."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = root / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def write_init(stage: Path, job: str) -> None:
    """/init and /sv/job.sh of the stage."""
    (stage / "sv").mkdir(parents=True, exist_ok=True)
    (stage / "sv" / "job.sh").write_text(job)
    (stage / "init").write_text(BOARD_INIT)
    (stage / "init").chmod(0o755)


def initramfs(rootfs: Path, stage: Path, out: Path, skip: tuple = INITRD_SKIP) -> Path:
    """The rootfs and the stage as one newc cpio (uncompressed: the kernel reads it as is)."""
    with open(out, "wb") as archive:
        for tree in (rootfs, stage):  # later entries win: the payload's /init replaces nothing else
            prune = [arg for path in skip for arg in ("-path", path, "-prune", "-o")]
            find = subprocess.Popen(["find", ".", *prune, "-print"], cwd=tree, stdout=subprocess.PIPE)
            subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=tree, stdin=find.stdout, stdout=archive,
                           check=True)
            find.wait()
    return out


def qemu_command(rootfs: Path, initrd: Path, memory_mb: int = 3072, network: bool = False,
                 cpu: str = "cortex-a72") -> list:
    """qemu-system-aarch64 on virt with ``cpu``: a Pi 4's Cortex-A72 (ARMv8.0) by default; a Pi 5's
    Cortex-A76 (ARMv8.2) for code built for it (PyPI's aarch64 torch executes ARMv8.2 instructions).
    Without ``network``: -nic none (virt's default NIC is virtio-net-pci, whose efi-virtio.rom
    qemu-system-arm installed without recommends lacks). With it: user-mode networking on a virtio-mmio
    card, which needs no ROM; the guest reaches this machine's loopback as 10.0.2.2."""
    kernel = sorted(rootfs.glob("boot/vmlinuz-*"))[-1]
    nic = (["-netdev", "user,id=net0", "-device", "virtio-net-device,netdev=net0"] if network else ["-nic", "none"])
    return ["qemu-system-aarch64", "-M", "virt", "-cpu", cpu, "-smp", "2", "-m", str(memory_mb),
            "-nographic", *nic, "-no-reboot", "-kernel", str(kernel), "-initrd", str(initrd),
            "-append", "console=ttyAMA0 rdinit=/init quiet panic=-1"]


def boot_arm64(rootfs: Path, initrd: Path, timeout_s: float) -> str:
    """Boot, run the job, return the console once the board powers off."""
    result = subprocess.run(qemu_command(rootfs, initrd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            timeout=timeout_s)
    return result.stdout.decode(errors="replace")


def marked(console: str, mark: str) -> dict:
    """The job's marked lines: {'python': ..., 'installed': '', 'out': base64, ...}."""
    lines = {}
    for line in console.splitlines():
        if line.startswith(mark + " "):
            key, _, value = line[len(mark) + 1:].strip().partition(" ")
            lines[key] = value
    return lines
