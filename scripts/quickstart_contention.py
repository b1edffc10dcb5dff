"""The quickstart's cost quiet and beside other work: wall time and CPU-seconds of `sensorveil quickstart`
run alone, then beside N busy-loop processes (sensorveil.benchmarks.contention's), written to
docs/quickstart_contention.md and .json.

    python scripts/quickstart_contention.py [--contend 1] [--policy passive active short-spin] [--allow-dirty]

CPU-seconds are the quickstart process's and its children's (user + system, from wait4), so threads
that spin while waiting count as what they cost. Goal: contended CPU-seconds within 1.3x of quiet.
``--policy`` names the OpenMP wait policies to compare (default: passive, what the trainer sets, and
active, OpenMP spinning as before it did); short-spin is libgomp's default with a short spin count.
The machine must otherwise be idle for the quiet figures to mean anything: the page records the load
average before each run.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sensorveil.benchmarks.contention import Contenders
from sensorveil_lab.provenance import page_header, provenance, require_clean

REPO = Path(__file__).resolve().parents[1]
GOAL = 1.3
# the OpenMP environment of each policy: passive (threads sleep at once), active (spin, OpenMP's ACTIVE),
# short-spin (libgomp's default policy with GOMP_SPINCOUNT=1000: spin briefly, then sleep)
POLICIES = {"passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "active": {"OMP_WAIT_POLICY": "ACTIVE"},
            "short-spin": {"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": "1000"}}


def run_quickstart(policy: str, out: Path) -> dict:
    """One `sensorveil quickstart` in a child process: its wall time and its CPU-seconds."""
    env = {**os.environ, **POLICIES[policy]}
    load = os.getloadavg()[0]
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "sensorveil", "quickstart", "--out", str(out)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"quickstart failed: {process.stderr.read().decode(errors='replace')[-2000:]}")
    return {"wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "load_before": round(load, 2)}


def measure(policy: str, contend: int, work: Path) -> dict:
    print(f"quickstart_contention: {policy}, quiet", file=sys.stderr, flush=True)
    quiet = run_quickstart(policy, work / f"{policy}-quiet")
    print(f"quickstart_contention: {policy}, beside {contend} busy process(es)", file=sys.stderr, flush=True)
    with Contenders(contend):
        contended = run_quickstart(policy, work / f"{policy}-contended")
    return {"policy": policy, "quiet": quiet, "contended": contended,
            "cpu_ratio": round(contended["cpu_s"] / quiet["cpu_s"], 2),
            "wall_ratio": round(contended["wall_s"] / quiet["wall_s"], 2)}


def render(result: dict) -> str:
    lines = ["# The quickstart quiet and beside other work", "", page_header(result["provenance"]), "",
             f"`sensorveil quickstart` alone, then beside {result['contend']} busy-loop process(es) on the same "
             f"{os.cpu_count()} cores. CPU-seconds: the quickstart and its children, user + system. "
             f"Goal: contended CPU-seconds within {GOAL}x of quiet.", "",
             "| OpenMP wait policy | quiet wall s | quiet CPU-s | contended wall s | contended CPU-s | CPU ratio "
             "| goal met |", "|---|---:|---:|---:|---:|---:|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['policy']} | {row['quiet']['wall_s']} | {row['quiet']['cpu_s']} | "
                     f"{row['contended']['wall_s']} | {row['contended']['cpu_s']} | {row['cpu_ratio']} | "
                     f"{'yes' if row['cpu_ratio'] <= GOAL else 'no'} |")
    lines += ["", "Load average (1 min) before each run: " + "; ".join(
        f"{row['policy']} {row['quiet']['load_before']} quiet, {row['contended']['load_before']} contended"
        for row in result["rows"]) + ". passive is what the trainer sets (sensorveil/sdk/threads.py); active is "
        "OpenMP spinning, the behaviour before.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contend", type=int, default=1)
    parser.add_argument("--policy", nargs="+", choices=sorted(POLICIES) + ["both"], default=["passive", "active"],
                        help="policies to compare; both = passive active (the page's earlier command)")
    parser.add_argument("--docs", type=Path, default=REPO / "docs")
    parser.add_argument("--allow-dirty", action="store_true")
    args = parser.parse_args(argv)
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    policies = [name for policy in args.policy for name in (("passive", "active") if policy == "both" else (policy,))]
    with tempfile.TemporaryDirectory() as folder:
        rows = [measure(policy, args.contend, Path(folder)) for policy in policies]
    result = {"provenance": record, "contend": args.contend, "rows": rows}
    (args.docs / "quickstart_contention.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.docs / "quickstart_contention.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
