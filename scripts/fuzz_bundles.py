"""Fuzz the runtime's fail-closed promise: mutate every manifest field, every stage array and the input
of real bundles, and check each mutation ends one of two ways:

* refused: ``Privatizer.load`` or the call raises the runtime's own error (a SensorveilError), or
* released: the output is finite, inside the output spec's range, and still privatized (not the input
  returned unchanged).

Anything else (another exception, NaN, out-of-range values, the raw input released) is a finding,
printed with the mutation that caused it. Exit 1 when there is any.

    python scripts/fuzz_bundles.py --cases 400 --seed 0 [--bundle DIR ...] [--json FILE]

Without --bundle it fuzzes the schema-1 fixtures in tests/fixtures (PR-GAN and PASS on digits) and, when
the trainer is installed, small Sanitizer (obfuscation) and AttriGuard bundles it trains first (--no-train
skips them). The mutations are seeded: the same seed replays the same cases. The mutations and the judge of each
case: sensorveil_lab.bundle_fuzz.
"""
import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from sensorveil_lab.bundle_fuzz import FIXTURES, SEED_BUNDLES, one_case


# -- seeds and the run -------------------------------------------------------------------------------------
def trained_seeds(work):
    """Small Sanitizer (obfuscation) and AttriGuard bundles: the stages whose values can switch noise off."""
    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    made = []
    for mechanism, settings, extra in (("sanitizer", {"mechanism": "obfuscation"}, {"epochs": 2}),
                                       ("attriguard", {"beta": "1.0"}, {})):
        run = train_run(mechanism, "digits", out=work / "runs" / mechanism, attacker_epochs=1, settings=settings,
                        **extra)
        made.append(export_run(run, "onnx", work / "seeds" / mechanism))
    return made


def run_fuzz(seeds, cases, seed, log=print):
    rng = np.random.default_rng(seed)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        for index in range(cases):
            results.append(one_case(seeds[index % len(seeds)], work, rng))
            if (index + 1) % 50 == 0:
                log("fuzz: {} of {} cases".format(index + 1, cases))
    return results


def summary(results):
    counts = {}
    for result in results:
        counts[result["outcome"]] = counts.get(result["outcome"], 0) + 1
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bundle", action="append", default=None, help="seed bundle (repeatable)")
    parser.add_argument("--no-train", action="store_true", help="fuzz only the fixtures / --bundle seeds")
    parser.add_argument("--json", default=None, help="write every case and its outcome here")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")       # numpy's overflow warnings on hostile values are expected noise
    started = time.time()
    with tempfile.TemporaryDirectory() as folder:
        seeds = [Path(path) for path in args.bundle] if args.bundle else [FIXTURES / name for name in SEED_BUNDLES]
        if not args.bundle and not args.no_train:
            print("fuzz: training small sanitizer and attriguard seed bundles", file=sys.stderr)
            seeds += trained_seeds(Path(folder))
        results = run_fuzz(seeds, args.cases, args.seed, log=lambda line: print(line, file=sys.stderr))
    findings = [result for result in results if result["outcome"] == "finding"]
    counts = summary(results)
    print("fuzz: {} cases over {} seed bundles in {:.0f} s: {} refused, {} released and checked, {} finding(s)".format(
        len(results), len(seeds), time.time() - started, counts.get("refused", 0), counts.get("released", 0),
        len(findings)))
    for finding in findings:
        print("  FINDING {bundle}: {mutation} -> {detail}".format(**finding))
    if args.json:
        Path(args.json).write_text(json.dumps({"seed": args.seed, "cases": results, "counts": counts}, indent=1))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
