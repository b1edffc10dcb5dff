"""sensorveil camera-audit BUNDLE: who a camera bundle's release shows, measured as re-identification is."""
import sys

from sensorveil.cli.common import positive_int, write_json


def cmd_camera_audit(args) -> int:
    from sensorveil.sdk.reid_audit import audit_bundle, format_identity
    result = audit_bundle(args.bundle, backend=args.backend, epochs=args.epochs, seed=args.seed,
                          log=lambda line: print(line, file=sys.stderr, flush=True))
    print(format_identity(result))
    write_json(result, args.json)
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("camera-audit", help="re-identify the people of a camera bundle's release: rank-1 and mAP "
                                              "against raw crops, with power; who the substitutes are")
    p.add_argument("bundle", help="a camera BUNDLE whose training run is on this machine (no retraining)")
    p.add_argument("--backend", default="auto", help="runtime backend that draws the release")
    p.add_argument("--epochs", type=positive_int, default=15, help="training epochs of the re-id attacker")
    p.add_argument("--seed", type=int, default=0, help="the attacker's seed and the intervals' bootstrap seed")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.set_defaults(func=cmd_camera_audit)
