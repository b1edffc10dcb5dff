"""sensorveil keys generate --out DIR: an Ed25519 key pair for signing bundles."""


def cmd_keys(args) -> int:
    from sensorveil.export.signing import generate_key_pair
    private_path, public_path = generate_key_pair(args.out)
    print(f"wrote {private_path} (private: sign with `sensorveil export ... --sign {private_path}`; keep it off "
          f"the devices)\nwrote {public_path} (public: give it to devices as trusted_keys=[...] or "
          "SENSORVEIL_TRUSTED_KEYS)")
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("keys", help="an Ed25519 key pair for signing bundles")
    p.add_argument("action", choices=("generate",))
    p.add_argument("--out", required=True, help="folder for signer.key (private, mode 0600) and signer.pub")
    p.set_defaults(func=cmd_keys)
