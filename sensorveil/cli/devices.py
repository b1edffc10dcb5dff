"""sensorveil devices [list | formats | detect | check BUNDLE --device NAME | compile BUNDLE [--sign KEY]]."""
from sensorveil.cli.common import UsageError, print_mapping, write_json
from sensorveil.runtime import capabilities


def print_table(header: list, rows: list) -> None:
    """Columns padded to their widest cell."""
    widths = [max(len(str(cells[i])) for cells in [header] + rows) for i in range(len(header))]
    for cells in [header] + rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(cells, widths)).rstrip())


def cmd_devices(args) -> int:
    from sensorveil import devices
    if args.action == "list":
        for name in devices.list_profiles():
            profile = devices.load_profile(name)
            print(f"{name:18s} {profile['backend']:12s} {profile['precision']:5s} {profile['description']}")
        return 0
    if args.action == "formats":
        if args.markdown:
            print(capabilities.markdown_table())
        else:
            print_table(capabilities.TABLE_HEADER, capabilities.table_rows())
        return 0
    if args.action == "detect":
        evidence = devices.detection_evidence()
        print_mapping("evidence", {key: (", ".join(value) if isinstance(value, list) else value) or "-"
                                    for key, value in evidence.items()})
        matches = devices.detect(evidence)
        for match in matches:
            print(f"detected {match['name']} (by {', '.join(match['matched_by'])}); "
                  f"set-up script: {devices.setup_script(match['name'])}")
        if not matches:
            print("no device profile matches this machine")
        return 0
    if args.action == "compile":
        return cmd_compile(args)
    if not args.bundle or not args.device:
        raise UsageError("devices check needs a bundle and a device: sensorveil devices check BUNDLE --device NAME")
    from sensorveil.export.device_check import check_bundle
    report = check_bundle(args.bundle, args.device)
    print(f"{args.device}: {report['file']} ({report['backend']}, {report['precision']}), "
          f"{sum(report['operator_counts'].values())} operators of {len(report['operator_counts'])} types")
    for problem in report["problems"]:
        print(f"  problem: {problem}")
    if report.get("note"):
        print(f"  note: {report['note']}")
    print("compatible" if report["compatible"] else "NOT compatible")
    write_json(report, args.json)
    return 0 if report["compatible"] else 1


def cmd_compile(args) -> int:
    """devices compile BUNDLE [--sign KEY]: the Edge TPU compile an export without edgetpu_compiler left to do."""
    if not args.bundle:
        raise UsageError("devices compile needs a bundle: sensorveil devices compile BUNDLE [--sign KEY]")
    from sensorveil.export.edgetpu_compile import compile_bundle
    compile_bundle(args.bundle, sign_key=args.sign)
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("devices", help="device profiles: list, formats (what exports to what), detect this "
                         "machine, check a bundle's operators, compile a bundle for the Edge TPU")
    p.add_argument("action", nargs="?", default="list", choices=("list", "formats", "detect", "check", "compile"))
    p.add_argument("bundle", nargs="?", default=None, help="check, compile: the bundle directory")
    p.add_argument("--device", default=None, help="check: a profile name from `sensorveil devices list`")
    p.add_argument("--json", default=None, help="check: also write the report to this JSON file")
    p.add_argument("--markdown", action="store_true", help="formats: as the README's markdown table")
    p.add_argument("--sign", default=None, metavar="KEY",
                   help="compile: re-sign the compiled bundle with this Ed25519 private key (required for a signed "
                   "bundle; `sensorveil keys generate`)")
    p.set_defaults(func=cmd_devices)
