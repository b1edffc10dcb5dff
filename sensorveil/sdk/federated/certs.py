"""What a secured Flower deployment needs, written with ``cryptography`` (``sensorveil federate certs`` and
``sensorveil federate node-keys``):

* TLS: a certificate authority (``ca.crt``, and ``ca.key`` to sign more), and the SuperLink's server
  certificate (``server.pem``) and key (``server.key``) signed by it, for ``localhost``, ``127.0.0.1`` and
  any other name or address the SuperNodes use to reach it. The SuperLink takes
  ``--ssl-ca-certfile ca.crt --ssl-certfile server.pem --ssl-keyfile server.key``; every SuperNode and the
  ``flwr`` CLI trust ``ca.crt`` (``--root-certificates``, ``root-certificates`` in config.toml).
* SuperNode authentication: one EC key pair (NIST P-384) per node, in OpenSSH format as Flower reads it:
  ``NAME`` (private, stays on the node: ``--auth-supernode-private-key``) and ``NAME.pub`` (registered
  on the SuperLink with ``flwr supernode register NAME.pub``; a SuperLink started with
  ``--enable-supernode-auth`` refuses every node whose key it does not hold).

Private keys are written with mode 0600, beside their target and renamed into place.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

LOOPBACK_HOSTS = ("localhost", "127.0.0.1")
VALID_DAYS = 365
TLS_FILES = {"ca": "ca.crt", "ca_key": "ca.key", "certificate": "server.pem", "key": "server.key"}


def write_certificates(out, hosts=LOOPBACK_HOSTS, days: int = VALID_DAYS) -> dict:
    """A CA and the SuperLink's server certificate for ``hosts`` (names and IP addresses) in ``out``;
    returns {"ca", "ca_key", "certificate", "key"}: their paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    hosts = list(dict.fromkeys(str(h).strip() for h in hosts if str(h).strip()))
    if not hosts:
        raise ValueError("no host for the SuperLink's certificate: expected names or addresses (localhost, 127.0.0.1)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, server_key = ec.generate_private_key(ec.SECP384R1()), ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sensorveil federation CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
              .issuer_name(ca_name).public_key(server_key.public_key())
              .serial_number(x509.random_serial_number()).not_valid_before(now)
              .not_valid_after(now + datetime.timedelta(days=days))
              .add_extension(x509.SubjectAlternativeName([alt_name(h) for h in hosts]), critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .sign(ca_key, hashes.SHA256()))
    paths = {role: out / name for role, name in TLS_FILES.items()}
    refuse_existing(paths.values())
    write_file(paths["ca"], certificate_pem(ca))
    write_file(paths["ca_key"], private_pem(ca_key), private=True)
    write_file(paths["certificate"], certificate_pem(server))
    write_file(paths["key"], private_pem(server_key), private=True)
    return paths


def write_node_keys(out, names) -> list:
    """An EC P-384 key pair per SuperNode name, OpenSSH format: ``out/NAME`` and ``out/NAME.pub``;
    returns [(private path, public path)]."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pairs = []
    for name in names:
        if not name or Path(name).name != name or name.startswith("."):
            raise ValueError(f"node name {name!r}: expected a plain file name (node-0, board-kitchen)")
        refuse_existing([out / name, out / f"{name}.pub"])
        key = ec.generate_private_key(ec.SECP384R1())
        private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                    serialization.NoEncryption())
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        write_file(out / name, private, private=True)
        write_file(out / f"{name}.pub", public + b"\n")
        pairs.append((out / name, out / f"{name}.pub"))
    return pairs


def refuse_existing(paths) -> None:
    existing = [str(p) for p in paths if Path(p).exists()]
    if existing:
        raise FileExistsError(f"{', '.join(existing)} already exist: expected a new folder (nothing is overwritten)")


def alt_name(host: str):
    from cryptography import x509
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def certificate_pem(certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return certificate.public_bytes(serialization.Encoding.PEM)


def private_pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_file(path: Path, data: bytes, private: bool = False) -> None:
    partial = path.with_name(path.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.replace(partial, path)
