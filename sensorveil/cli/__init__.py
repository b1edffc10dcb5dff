"""The one console script, `sensorveil`: one module per verb, each holding its arguments beside its
handler (``add_parser`` and ``cmd_*``). Each verb imports what it needs when it runs, so the runtime
verbs work on a device that has numpy and one backend library and nothing else.
Runs on the boards' Python (3.6) like the runtime verbs it serves: no annotations import here.
"""
import argparse
import sys

from sensorveil import __version__
from sensorveil.cli import (
    benchmark,
    camera_audit,
    devices,
    evaluate,
    export,
    federate,
    keys,
    preview,
    quickstart,
    run,
    scene_still,
    train,
)
from sensorveil.cli.common import UsageError  # noqa: F401  (re-exported: callers catch it)
from sensorveil.cli.run import stream_exit_code  # noqa: F401  (re-exported: the stream tests use it)
from sensorveil.runtime.errors import SensorveilError
from sensorveil.sdk.threads import prefer_passive_waits

# the verbs in the order `sensorveil --help` lists them
VERBS = (quickstart, train, evaluate, camera_audit, scene_still, export, keys, federate, benchmark, devices, run,
         preview)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sensorveil", description="Privacy at the sensor: train, export, run, "
                                     "benchmark and preview privatizing mechanisms.")
    parser.add_argument("--version", action="version", version=f"sensorveil {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")   # required=: Python 3.7+, checked in main
    for verb in VERBS:
        verb.add_parser(verbs)
    return parser


def main(argv=None) -> int:
    # before any verb imports torch: OpenMP threads that sleep instead of spinning (sensorveil.sdk.threads)
    prefer_passive_waits()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.error("a VERB is required (see sensorveil --help)")
    try:
        return args.func(args)
    # OSError: a path that cannot be read or written; the federation's errors: a failed node or round
    except (SensorveilError, ValueError, OSError) + federation_errors() as error:
        print(f"sensorveil {args.verb}: error: {error}", file=sys.stderr)
        return 2


def federation_errors() -> tuple:
    """FederationError (and FederationTimeout, its subclass) when the federated package is loaded: looked up
    when an error is being matched, so the CLI never imports the sdk's federated code (or numpy) on a board."""
    module = sys.modules.get("sensorveil.sdk.federated.validation")
    return (module.FederationError,) if module is not None else ()


if __name__ == "__main__":
    sys.exit(main())
