"""The two protections a federated mechanism can ask Flower for, as settings of its config, and the checks
that refuse a setting which would protect less than it says.

* ``secure_aggregation``: Flower's SecAgg+ (federated.secure_aggregation). The server learns the sum of
  the round's updates, never one of them, so nothing that judges one update can run: the round's
  median-relative bound (``norm_multiple``) and the robust aggregations (FedMedian, FedTrimmedAvg) are
  refused with it, as is averaging a random share of updates already trained (TAPPFL's participation
  "all" with fraction < 1). The aggregate itself is still checked (finite, shapes, ``max_update_ratio``).
  ``secagg_clipping_range``: SecAgg+ quantizes every parameter within [-range, range] before masking.
* ``dp_noise_multiplier`` and ``dp_clipping_norm``: central differential privacy with client-side fixed
  clipping, Flower's ``DifferentialPrivacyClientSideFixedClipping`` and ``fixedclipping_mod``
  (federated.differential_privacy). Each device clips its update to the clipping norm; the server adds
  Gaussian noise of standard deviation noise_multiplier x clipping_norm / devices averaged to the mean.
  Both unset: off. A value that would switch the noise off or make it meaningless is refused, never
  read as "off". ``dp_delta``: the delta (epsilon, delta) is reported at.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class PrivacyOptions:
    """Mixed into a federated mechanism's config (``--set secure_aggregation=true``, ``--set
    dp_noise_multiplier=1.0 dp_clipping_norm=0.5``)."""
    secure_aggregation: bool = False        # Flower's SecAgg+: the server sees only the sum of the updates
    secagg_clipping_range: float = 8.0      # SecAgg+ quantizes every parameter within +- this
    dp_noise_multiplier: float | None = None   # Gaussian noise std over the clipping norm; None: no DP
    dp_clipping_norm: float | None = None      # the norm each device clips its update to; None: no DP
    dp_delta: float = 1e-5                  # delta of the reported (epsilon, delta)


def differential_privacy_on(config) -> bool:
    return config.dp_noise_multiplier is not None or config.dp_clipping_norm is not None


def check_privacy_options(config, aggregated_per_round: int, averages_a_share: bool = False) -> None:
    """One clear error for a protection that would not hold as set. ``aggregated_per_round``: the updates a
    round combines; ``averages_a_share``: the server averages a random share of the updates it received."""
    if not isinstance(config.secure_aggregation, bool):
        raise ValueError(f"secure_aggregation={config.secure_aggregation!r}: expected true or false")
    if config.secure_aggregation:
        check_secure_aggregation(config, aggregated_per_round, averages_a_share)
    if differential_privacy_on(config):
        check_differential_privacy(config)


def check_secure_aggregation(config, aggregated_per_round: int, averages_a_share: bool) -> None:
    def refuse(field: str, value, expected: str):
        raise ValueError(f"{field}={value!r} with secure_aggregation=true: the server sees only the sum of the "
                         f"round's updates under SecAgg+, never one of them; expected {expected}")
    if config.aggregation != "fedavg":
        refuse("aggregation", config.aggregation, "aggregation=fedavg (a median or a trimmed mean needs every "
               "update in the clear)")
    if config.norm_multiple != 0:
        refuse("norm_multiple", config.norm_multiple, "norm_multiple=0 (the bound relative to the round's median "
               "update needs each update's distance; the aggregate is still checked by max_update_ratio)")
    if averages_a_share:
        refuse("participation", getattr(config, "participation", "all"), "participation=sampled or fraction=1 "
               "(SecAgg+ sums every update the server asked for, so it cannot average a random share of them)")
    if aggregated_per_round < 2:
        refuse("clients", aggregated_per_round, "2 or more devices a round (a sum of one update is that update)")
    if not (math.isfinite(config.secagg_clipping_range) and config.secagg_clipping_range > 0):
        raise ValueError(f"secagg_clipping_range={config.secagg_clipping_range}: expected a finite number > 0 "
                         "(SecAgg+ quantizes every parameter within +- that range)")
    if differential_privacy_on(config):
        raise ValueError(f"dp_noise_multiplier={config.dp_noise_multiplier} with secure_aggregation=true: the two "
                         "are not combined here (the noise is added on the server to the clear aggregate); "
                         "expected one of them")


def check_differential_privacy(config) -> None:
    for field, meaning in (("dp_noise_multiplier", "the noise's standard deviation over the clipping norm; "
                                                    "0 would release the clipped mean without noise"),
                           ("dp_clipping_norm", "the norm every device's update is clipped to")):
        value = getattr(config, field)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{field}={value!r}: expected a finite number > 0 ({meaning}); set both "
                             "dp_noise_multiplier and dp_clipping_norm, or neither for no differential privacy")
    delta = config.dp_delta
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ValueError(f"dp_delta={delta!r}: expected a number in (0, 1), well below 1 / the number of devices")


def strategy_privacy_settings(config: dict, max_examples: int | None) -> dict:
    """The strategy's keyword arguments for the protections a run config (a dict) asks for."""
    settings = {}
    if config.get("secure_aggregation"):
        settings["secure_aggregation"] = {"clipping_range": float(config.get("secagg_clipping_range", 8.0)),
                                          "max_weight": float(max_examples or 1000)}
    if config.get("dp_noise_multiplier") is not None or config.get("dp_clipping_norm") is not None:
        settings["differential_privacy"] = {"noise_multiplier": float(config["dp_noise_multiplier"]),
                                            "clipping_norm": float(config["dp_clipping_norm"])}
    return settings
