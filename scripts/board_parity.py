"""Runs on a board's own Python (3.6 and up, numpy and the runtime only): loads each bundle of a job
file, privatizes the same input and saves what it emits, so the caller can compare it with what the
workstation's runtime emits for the same bundle and seed.

    python3 board_parity.py JOBS.json X.npz OUT.npz [--repeats N]

JOBS.json maps a name to {"bundle": DIR, "backend": NAME, "options": {...}}; X.npz holds ``x``.
OUT.npz gets NAME (the output), NAME_describe (the backend's description, JSON) and NAME_fps
(batch-1 calls a second over ``--repeats`` calls; under emulation it says only that it runs).
Used by tests/integration/test_old_pythons.py and scripts/device_matrix.py.
"""
import argparse
import importlib.util
import json
import time

import numpy as np

from sensorveil.runtime import Privatizer


def batch_one_fps(privatizer, sample, repeats: int) -> float:
    privatizer(sample)                       # first call: backend warm-up, not timed
    start = time.perf_counter()
    for _ in range(repeats):
        privatizer(sample)
    return repeats / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs")
    parser.add_argument("x")
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=0)
    args = parser.parse_args()
    with open(args.jobs) as handle:
        jobs = json.load(handle)
    x = np.load(args.x)["x"]
    out = {}
    for name, job in jobs.items():
        privatizer = Privatizer.load(job["bundle"], backend=job["backend"], **job.get("options", {}))
        out[name] = privatizer(x)
        out[name + "_describe"] = np.array(json.dumps(privatizer.describe()))
        if args.repeats:
            out[name + "_fps"] = np.array(batch_one_fps(privatizer, x[:1], args.repeats))
    np.savez(args.out, **out)
    print("torch importable:", importlib.util.find_spec("torch") is not None)


if __name__ == "__main__":
    main()
