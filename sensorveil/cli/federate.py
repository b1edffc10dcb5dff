"""sensorveil federate certs|node-keys --out DIR: what a secured Flower deployment needs (TLS certificates for
the SuperLink, an authentication key pair per SuperNode); docs/guides/mechanisms.md has the commands that use them.
Runs on the boards' Python (3.6) like the runtime verbs it serves: no annotations import here.
"""


def cmd_federate(args) -> int:
    from sensorveil.sdk.federated.certs import LOOPBACK_HOSTS, write_certificates, write_node_keys
    if args.action == "certs":
        paths = write_certificates(args.out, list(LOOPBACK_HOSTS) + list(args.host or []))
        print(f"wrote {paths['ca']} (the CA: give it to every SuperNode as --root-certificates and to flwr as "
              f"root-certificates)\nwrote {paths['certificate']} and {paths['key']} (the SuperLink's: "
              f"--ssl-ca-certfile {paths['ca']} --ssl-certfile {paths['certificate']} --ssl-keyfile {paths['key']})"
              f"\nwrote {paths['ca_key']} (private: signs more certificates; keep it off every machine of the "
              "federation)")
        return 0
    for private, public in write_node_keys(args.out, args.names or ["node-0"]):
        print(f"wrote {private} (private: on that SuperNode only, --auth-supernode-private-key {private})\n"
              f"wrote {public} (register it on the SuperLink: flwr supernode register {public})")
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("federate", help="TLS certificates and SuperNode keys for a secured Flower deployment")
    p.add_argument("action", choices=("certs", "node-keys"),
                   help="certs: a CA and the SuperLink's certificate and key; node-keys: an EC key pair per "
                        "SuperNode (Flower's node authentication)")
    p.add_argument("--out", required=True, help="folder to write into (private keys get mode 0600; nothing that "
                   "exists is overwritten)")
    p.add_argument("--host", nargs="+", default=None,
                   help="certs: names or addresses the SuperNodes reach the SuperLink by, besides localhost and "
                        "127.0.0.1 (e.g. superlink.lab 192.168.1.20)")
    p.add_argument("--names", nargs="+", default=None, help="node-keys: one name per SuperNode (default node-0)")
    p.set_defaults(func=cmd_federate)
