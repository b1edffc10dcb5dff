"""sensorveil evaluate RUN_DIR|BUNDLE: the audit, attackers of several families over seeds."""
import sys

from sensorveil.cli.common import positive_int, write_json


def cmd_evaluate(args) -> int:
    from sensorveil.sdk.assess import audit_path
    from sensorveil.sdk.audit import format_audit, write_report
    result = audit_path(args.path, backend=args.backend, seeds=args.seeds, attacker_epochs=args.attacker_epochs,
                        log=lambda line: print(line, file=sys.stderr, flush=True))
    title = (f"audit of {result['source']} ({result['mechanism']}"
             + (f", {result['backend']}" if "backend" in result else ", trained model") + ")")
    print(format_audit(result, title))
    if "protocol_acc_private" in result:
        print(f"  paper protocol (the defender's fixed classifiers): D_z {result['protocol_acc_private']:.1%}, "
              f"D_y {result['protocol_acc_useful']:.1%}")
    write_json(result, args.json)
    if args.report:
        page = write_report(result, title, args.report)
        plot = page.with_suffix(".png")     # only when matplotlib could draw it
        print(f"wrote {page}" + (f" and {plot}" if plot.is_file() else " (no plot: matplotlib is not installed)"))
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("evaluate", help="audit a run or a bundle: attackers of several families, over seeds, "
                                          "with 95%% intervals")
    p.add_argument("path", help="RUN_DIR or BUNDLE")
    p.add_argument("--backend", default="auto", help="runtime backend for a bundle")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.add_argument("--attacker-epochs", type=positive_int, default=20, help="training epochs of each neural attacker")
    p.add_argument("--seeds", type=int, default=3, help="repeats of every attacker (the 95%% intervals need >= 2)")
    p.add_argument("--report", default=None, metavar="FILE.md", help="also write a markdown report and its plot")
    p.set_defaults(func=cmd_evaluate)
