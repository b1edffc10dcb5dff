"""Threads for training and auditing on a CPU that other work shares (a board's camera app, a second
training run, CI beside a build).

torch's CPU build runs its kernels on OpenMP (libgomp): a thread that finishes its share of a kernel
spins, waiting for the next, for up to about 300,000 iterations before it sleeps. On a quiet machine that
wins a little latency; beside another busy process the spinning threads take cores the other process
needed, and the same work costs more CPU-seconds the busier the machine is. OMP_WAIT_POLICY=PASSIVE
makes them sleep at once. It is read when libgomp loads, so it is set before torch is imported: here,
from ``sensorveil.sdk``'s import (every trainer module imports that package first) and from the CLI.
A value the user set is kept.
"""
import os

PASSIVE_WAITS = {"OMP_WAIT_POLICY": "PASSIVE"}


def prefer_passive_waits() -> None:
    """Set the OpenMP wait policy for this process and its children, unless the user chose one."""
    for variable, value in PASSIVE_WAITS.items():
        os.environ.setdefault(variable, value)

