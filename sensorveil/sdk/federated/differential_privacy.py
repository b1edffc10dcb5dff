"""Central differential privacy with client-side fixed clipping, from Flower's own parts: the server
strategy is wrapped in ``DifferentialPrivacyClientSideFixedClipping`` (it sends the clipping norm with each
round and adds Gaussian noise to the aggregate) and every device runs ``fixedclipping_mod`` (it clips its
update, new model minus global model, to that norm before sending it; Andrew et al. 2021, McMahan et al. 2018).

What is protected: one device's whole contribution in a round (add or remove one device). The noise is
noise_multiplier x clipping_norm / n_sampled and one device moves a mean of n_aggregated updates by at most
clipping_norm / n_aggregated, so a round is the Gaussian mechanism with the effective multiplier
noise_multiplier x n_aggregated / n_sampled (the configured one unless the server dropped an update). The
mean is unweighted here: a device's claimed row count would otherwise scale its influence past the bound.
No amplification by sampling is claimed: every round counts as a release of every device, so the
(epsilon, delta) of federated.accountant is an upper bound whichever devices a round drew.

Flower's wrapper aggregates even when a device failed (it logs and skips); here the strict strategy inside
decides, so a failed device still fails the round. The server's per-update checks (federated.validation)
still run, on the clipped updates.
"""
from __future__ import annotations

from sensorveil.sdk.federated.accountant import epsilon_for

NOISE_METRIC = "dp_noise_multiplier"   # a training round's effective noise multiplier, in the round history
MECHANISM = ("Gaussian noise on the mean of client-side clipped updates (Flower's "
             "DifferentialPrivacyClientSideFixedClipping and fixedclipping_mod)")
ACCOUNTING = ("RDP of the Gaussian mechanism composed over every training round, no amplification by sampling "
              "(Mironov 2017; Mironov, Talwar and Zhang 2019); neighbouring runs differ by one device's data")


def clipping_when_asked(msg, context, call_next):
    """Client mod: Flower's ``fixedclipping_mod`` on a training round whose config carries a clipping norm
    (the server runs with differential privacy), else the handler alone. The same ClientApp serves both."""
    from flwr.app.message_type import MessageType
    from flwr.clientapp.mod import fixedclipping_mod
    from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM
    if msg.metadata.message_type != MessageType.TRAIN or not any(
            KEY_CLIPPING_NORM in record for record in msg.content.config_records.values()):
        return call_next(msg, context)
    return fixedclipping_mod(msg, context, call_next)


def private_strategy(strategy, noise_multiplier: float, clipping_norm: float, num_sampled: int):
    """``strategy`` (a StrictRounds) inside Flower's DifferentialPrivacyClientSideFixedClipping."""
    from flwr.serverapp.strategy import DifferentialPrivacyClientSideFixedClipping

    class StrictClientSideFixedClipping(DifferentialPrivacyClientSideFixedClipping):
        """Flower's wrapper with the strict strategy deciding every round (module docstring)."""

        def aggregate_train(self, server_round, replies):
            arrays, metrics = self.strategy.aggregate_train(server_round, replies)
            if arrays is not None:
                arrays = self._add_noise_to_aggregated_arrays(arrays)
            return arrays, metrics

        @property
        def sent(self) -> dict:
            return self.strategy.sent

    strategy.uniform_weights = True
    strategy.release_figures = lambda aggregated: {
        NOISE_METRIC: noise_multiplier * aggregated / num_sampled, "dp_clipping_norm": clipping_norm}
    return StrictClientSideFixedClipping(strategy, noise_multiplier, clipping_norm, num_sampled)


def privacy_record(config: dict, rounds: list) -> dict | None:
    """The run record's differential privacy: the settings, and the (epsilon, delta) spent over ``rounds``
    (the round history: entries with a "train" metrics dict). None when the run had none."""
    if config.get("dp_noise_multiplier") is None and config.get("dp_clipping_norm") is None:
        return None
    multipliers = [float(r["train"][NOISE_METRIC]) for r in rounds if NOISE_METRIC in r.get("train", {})]
    epsilon, order = epsilon_for(multipliers, float(config["dp_delta"]))
    return {"mechanism": MECHANISM, "noise_multiplier": float(config["dp_noise_multiplier"]),
            "clipping_norm": float(config["dp_clipping_norm"]), "rounds_released": len(multipliers),
            "epsilon": round(epsilon, 4), "delta": float(config["dp_delta"]), "rdp_order": order,
            "accounting": ACCOUNTING}


def privacy_metrics(record: dict | None) -> dict:
    """The run's headline figures beside privacy and utility (run.json metrics, the bundle's manifest)."""
    return {} if record is None else {"dp_epsilon": record["epsilon"], "dp_delta": record["delta"]}
