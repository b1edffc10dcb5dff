"""The server strategies: Flower's own aggregation rules, made strict about what they aggregate.

One strategy per choice of ``aggregation``, each Flower's class with the same checks in front:

* ``"fedavg"``: ``StrictFedAvg`` on flwr's FedAvg, the mean weighted by each device's "num-examples"
  (McMahan et al. 2017). The default.
* ``"fedmedian"``: ``StrictFedMedian`` on flwr's FedMedian, the coordinate-wise median of the
  updates, unweighted (Yin et al. 2018). One device of three or more cannot move it arbitrarily.
* ``"fedtrimmedavg"``: ``StrictFedTrimmedAvg`` on flwr's FedTrimmedAvg, the coordinate-wise mean after
  cutting ``beta`` (our ``trim_fraction``) of the updates from each tail, unweighted (Yin et al. 2018).
  It resists floor(beta * n) outlying devices per coordinate, so a beta that cuts no update at a round's
  n is refused (``check_trim``), before training and again in the round, naming the least beta that cuts one.

The checks, for every round: a sampled device that failed or did not answer in time fails the round
(Flower's own strategies log it and go on); every reply is validated (federated.validation) and one that
fails is dropped and its device named, in a log line and in the progress report; a training round with
fewer valid updates than ``min_valid_replies`` (0: more than half of the devices sampled) fails with one
error naming every device dropped and why.
"""
from __future__ import annotations

import logging
import math
import random
import time

from sensorveil.sdk.federated.logs import client_reason
from sensorveil.sdk.federated.validation import FederationError, UpdateLimits, split_replies, too_few_message

AGGREGATIONS = ("fedavg", "fedmedian", "fedtrimmedavg")
LOG = logging.getLogger("sensorveil.federated")
_CLASSES: dict = {}


def check_aggregation(aggregation: str, trim_fraction: float = 0.2, clients: int | None = None) -> None:
    """One clear error for a setting Flower would reject later, inside the ServerApp, or that would make
    FedTrimmedAvg a plain mean for rounds of ``clients`` updates."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation={aggregation!r}; expected one of {', '.join(AGGREGATIONS)}")
    if not 0.0 <= trim_fraction < 0.5:
        raise ValueError(f"trim_fraction={trim_fraction}: FedTrimmedAvg cuts that share from each tail, so it "
                         "must lie in [0, 0.5)")
    if aggregation == "fedtrimmedavg" and clients is not None:
        check_trim(trim_fraction, clients)


def trimmed_per_tail(trim_fraction: float, clients: int) -> int:
    """Updates FedTrimmedAvg cuts from each tail of ``clients``: Flower's trim_mean cuts int(beta * n)."""
    return int(trim_fraction * clients)


def least_trim_fraction(clients: int) -> float | None:
    """The least fraction, to 4 decimals, that trims one update of ``clients``; None when only 0.5 or more would."""
    if clients <= 2:
        return None
    least = math.ceil(1e4 / clients) / 1e4
    while trimmed_per_tail(least, clients) < 1:   # 1/n in binary can fall short of n: round up
        least += 1e-4
    return round(least, 4)


def check_trim(trim_fraction: float, clients: int, error=ValueError) -> None:
    """``error`` when trim_fraction cuts no update from a round of ``clients`` (FedTrimmedAvg would be FedAvg
    unweighted): the message names the value, the round's size and the least fraction that cuts one."""
    if trimmed_per_tail(trim_fraction, clients) >= 1:
        return
    least = least_trim_fraction(clients)
    remedy = (f"the least trim_fraction that trims one from each tail is {least:g} (1/{clients})" if least else
              f"no trim_fraction below 0.5 trims one of {clients}; expected more clients or aggregation=fedmedian")
    raise error(f"trim_fraction={trim_fraction:g} trims no update from a round of {clients} clients "
                f"(int({trim_fraction:g} x {clients}) = 0, so fedtrimmedavg would be a plain mean); {remedy}")


def strategy_class(aggregation: str = "fedavg"):
    """The strategy class for ``aggregation``; defined on first use so this module imports without flwr."""
    check_aggregation(aggregation)
    if not _CLASSES:
        _CLASSES.update(_define_strategies())
    return _CLASSES[aggregation]


def _define_strategies() -> dict:
    from flwr.serverapp.strategy import FedAvg, FedMedian, FedTrimmedAvg

    class StrictFedAvg(StrictRounds, FedAvg):
        """FedAvg over the validated updates (module docstring)."""

    class StrictFedMedian(StrictRounds, FedMedian):
        """FedMedian over the validated updates (module docstring)."""

    class StrictFedTrimmedAvg(StrictRounds, FedTrimmedAvg):
        """FedTrimmedAvg over the validated updates; ``beta`` is the share cut from each tail."""

    return {"fedavg": StrictFedAvg, "fedmedian": StrictFedMedian, "fedtrimmedavg": StrictFedTrimmedAvg}


class StrictRounds:
    """The checks in front of a Flower strategy (mixed in before it). ``aggregate_fraction``: aggregate
    only that share of the valid updates, drawn at random (TAPPFL's Algorithm 1: every device trains,
    the server averages rho M of them). ``progress(stage, round, metrics, seconds, devices, dropped)``
    after each aggregation."""

    def __init__(self, *args, progress=None, aggregate_fraction: float | None = None,
                 limits: UpdateLimits | None = None, min_valid_replies: int = 0,
                 secure_aggregation: dict | None = None, differential_privacy: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if min_valid_replies < 0:
            raise ValueError(f"min_valid_replies={min_valid_replies}: expected >= 0 (0: more than half the sample)")
        self.progress, self.aggregate_fraction = progress, aggregate_fraction
        self.limits, self.min_valid_replies = limits or UpdateLimits(), min_valid_replies
        self.sent, self.started, self.reference = {}, {}, None
        # federated.privacy_options: SecAgg+ replaces the training loop, differential privacy wraps this strategy
        self.secure_aggregation, self.differential_privacy = secure_aggregation, differential_privacy
        self.uniform_weights, self.release_figures = False, None   # set by the differential privacy wrapper

    def start(self, grid, initial_arrays, num_rounds: int = 3, timeout: float = 3600, train_config=None,
              evaluate_config=None, evaluate_fn=None):
        """Flower's loop, through SecAgg+ or inside Flower's differential privacy wrapper when asked."""
        from flwr.app import ConfigRecord
        train_config = ConfigRecord() if train_config is None else train_config
        evaluate_config = ConfigRecord() if evaluate_config is None else evaluate_config
        if self.secure_aggregation is not None:
            from sensorveil.sdk.federated.secure_aggregation import run_secure_rounds
            return run_secure_rounds(self, grid, initial_arrays, num_rounds, timeout, train_config, evaluate_config,
                                     self.secure_aggregation)
        if self.differential_privacy is not None:
            from sensorveil.sdk.federated.differential_privacy import private_strategy
            wrapped = private_strategy(self, num_sampled=self.aggregated_per_round(), **self.differential_privacy)
            return wrapped.start(grid, initial_arrays, num_rounds, timeout, train_config, evaluate_config, evaluate_fn)
        return super().start(grid, initial_arrays, num_rounds, timeout, train_config, evaluate_config, evaluate_fn)

    def aggregated_per_round(self) -> int:
        """The updates a round averages when every sampled device answers and none is dropped."""
        sampled = max(int(self.min_available_nodes * self.fraction_train), self.min_train_nodes, 1)
        return max(1, round(self.aggregate_fraction * sampled)) if self.aggregate_fraction is not None else sampled

    def configure_train(self, server_round, arrays, config, grid):
        from flwr.serverapp.strategy.strategy_utils import sample_nodes
        # FedAvg sizes its sample from the nodes connected *now* and only then waits for
        # min_available_nodes: with 100 simulated nodes still registering, fraction 0.1 of the 10
        # already up gave a one-device round. Wait for all of them first.
        sample_nodes(grid, self.min_available_nodes, 0)
        self.reference = {name: array.numpy() for name, array in arrays.items()}
        return self._remember("train", super().configure_train(server_round, arrays, config, grid))

    def configure_evaluate(self, server_round, arrays, config, grid):
        return self._remember("evaluate", super().configure_evaluate(server_round, arrays, config, grid))

    def _remember(self, stage: str, messages):
        messages = list(messages)
        self.sent[stage], self.started[stage] = len(messages), time.time()
        return messages

    def aggregate_train(self, server_round, replies):
        replies, dropped = self._validated(replies, "train", server_round, self.reference)
        needed = self.min_valid_replies or self.sent.get("train", 0) // 2 + 1
        if len(replies) < needed:
            raise FederationError(too_few_message(server_round, "train", len(replies), self.sent.get("train", 0),
                                                  needed, dropped))
        if self.aggregate_fraction is not None:
            replies = random.sample(replies, max(1, round(self.aggregate_fraction * len(replies))))
        if hasattr(self, "beta"):   # FedTrimmedAvg: a round it would not trim fails instead of averaging all
            check_trim(self.beta, len(replies), error=lambda text: FederationError(f"round {server_round}: {text}"))
        if self.uniform_weights:   # a device's claimed row count must not scale it past the clipping bound
            for reply in replies:
                next(iter(reply.content.metric_records.values()))[self.weighted_by_key] = 1
        arrays, metrics = super().aggregate_train(server_round, replies)
        if self.release_figures is not None and metrics is not None:
            for key, value in self.release_figures(len(replies)).items():
                metrics[key] = value
        self._report("train", server_round, metrics, len(replies), dropped)
        return arrays, metrics

    def aggregate_evaluate(self, server_round, replies):
        replies, dropped = self._validated(replies, "evaluate", server_round, None)
        metrics = super().aggregate_evaluate(server_round, replies) if replies else None
        self._report("evaluate", server_round, metrics, len(replies), dropped)
        return metrics

    def _validated(self, replies, stage: str, server_round: int, reference):
        replies = check_replies(list(replies), self.sent.get(stage, 0), stage, server_round)
        valid, dropped = split_replies(replies, reference, self.limits, self.weighted_by_key)
        for device in dropped:
            LOG.warning("round %s (%s): dropped the update of %s", server_round, stage, device)
        return valid, dropped

    def _report(self, stage, server_round, metrics, devices, dropped):
        if self.progress is not None and self.sent.get(stage):
            self.progress(stage, server_round, dict(metrics or {}), time.time() - self.started[stage], devices,
                          [device.as_record() for device in dropped])


def check_replies(replies: list, expected: int, stage: str, server_round: int) -> list:
    """The replies of one round, or FederationError naming the devices that failed or were missing."""
    failed = [reply for reply in replies if reply.has_error()]
    if failed:
        reasons = "; ".join(f"node {r.metadata.src_node_id}: {client_reason(r.error.reason)}" for r in failed[:3])
        raise FederationError(f"round {server_round} ({stage}): {len(failed)} of {expected} devices failed: {reasons}")
    if len(replies) < expected:
        raise FederationError(f"round {server_round} ({stage}): only {len(replies)} of {expected} devices replied "
                              "within the round timeout")
    return replies
