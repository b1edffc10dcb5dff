"""Flower's deployment engine, secured: a SuperLink serving TLS with a certificate from
`sensorveil federate certs`, authenticating SuperNodes by the EC keys of `sensorveil federate node-keys`
(registered with `flwr supernode register`), as separate processes on 127.0.0.1. pass-federated trains
through it; a SuperNode whose key is not registered is refused."""
from __future__ import annotations

import stat
import subprocess

import pytest

from sensorveil.sdk import federated

pytest.importorskip("flwr", reason="Flower is the federated extra: pip install 'sensorveil[federated]'")
TINY = {"clients": 2, "rounds": 1, "local_epochs": 1, "substitutes": 128, "embedding_dim": 32, "progress": False}


def test_the_certificates_verify_for_loopback_and_the_private_keys_are_the_owners_only(tmp_path):
    from cryptography import x509

    from sensorveil.cli import main
    assert main(["federate", "certs", "--out", str(tmp_path), "--host", "superlink.lab", "10.0.0.5"]) == 0
    assert main(["federate", "node-keys", "--out", str(tmp_path), "--names", "board-0"]) == 0
    server = x509.load_pem_x509_certificate((tmp_path / "server.pem").read_bytes())
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(a) for a in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "10.0.0.5"}
    assert set(names.get_values_for_type(x509.DNSName)) == {"localhost", "superlink.lab"}
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    server.verify_directly_issued_by(ca)
    for private in ("ca.key", "server.key", "board-0"):
        assert stat.S_IMODE((tmp_path / private).stat().st_mode) == 0o600
    assert (tmp_path / "board-0.pub").read_text().startswith("ecdsa-sha2-nistp384 ")
    assert main(["federate", "certs", "--out", str(tmp_path)]) == 2   # nothing is overwritten


@pytest.mark.loopback
@pytest.mark.boots
@pytest.mark.trains
def test_training_over_tls_with_authenticated_supernodes_refuses_an_unregistered_node(tmp_path, monkeypatch):
    from sensorveil.cli import main
    from sensorveil.sdk.federated.certs import write_certificates, write_node_keys
    from sensorveil.sdk.runs import read_run
    home = tmp_path / "flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    tls = write_certificates(tmp_path / "certs")
    keys = [private for private, _ in write_node_keys(tmp_path / "keys", ["node-0", "node-1", "stranger"])]
    nodes = [f'partition-id={i} num-partitions=2 data-path="{tmp_path / "run" / "devices" / f"device-{i}"}"'
             for i in range(2)]
    with federated.LoopbackFederation(home, nodes, tls=tls, node_keys=keys[:2]) as federation:
        stranger = federation.start_node("stranger", "partition-id=0 num-partitions=2", keys[2], retries=1)
        settings = [f"{k}={v}" for k, v in TINY.items()]
        assert main(["train", "pass-federated", "--dataset", "digits", "--useful", "parity", "--private", "lt5",
                     "--out", str(tmp_path / "run"), "--attacker-epochs", "1", "--set", "federation=deployment",
                     f"superlink={federation.name}", "timeout_s=150", "round_timeout_s=60", *settings]) == 0
        assert stranger.wait(timeout=60) != 0
        listed = subprocess.run([federated.flower_executable("flwr"), "supernode", "list", federation.name],
                                env=federated.flower_environment(home), capture_output=True, text=True, timeout=60)
    assert "Failed to activate SuperNode" in (home / "stranger.log").read_text()
    assert "No SuperNode found with the given public key" in (home / "superlink.log").read_text()
    assert listed.stdout.count("online") == 2
    rounds = read_run(tmp_path / "run")["federation"]["rounds"]
    assert [(r["round"], r["sampled"], r["devices"], r["dropped"]) for r in rounds] == [(1, 2, 2, [])]
