"""Flower's SecAgg+ (Bell et al. 2020) for the training rounds: the server learns the weighted sum of the
round's updates and never one of them.

In Flower 1.41 SecAgg+ exists for its legacy API only: ``SecAggPlusWorkflow`` drives four rounds of messages
(keys, shares, masked vectors, unmasking) for a legacy ``flwr.server.strategy.FedAvg`` in a ``LegacyContext``,
and ``secaggplus_mod`` on each device masks the legacy ``FitRes`` its handler returns. So:

* server: ``run_secure_rounds`` runs that workflow once per round (Flower's own DefaultWorkflow loop, written
  out so that the aggregate is checked and reported each round and evaluation keeps the message API), the
  legacy FedAvg sampling the devices as the strict strategy would;
* device: ``secure_aggregation_when_asked`` applies ``secaggplus_mod`` to a training message that carries
  SecAgg+'s config record (the server asked for it), and ``fitins_adapter`` hands the mechanism's message-API
  handler the global model by its array names (sent in the round config) and turns its reply into a FitRes.

The legacy format carries arrays without names, shapes or dtypes (Flower's ``Parameters``): the round config
sends the names, and the aggregate is read back in the global model's own shapes and dtypes.
"""
from __future__ import annotations

import json
import time

import numpy as np

from sensorveil.sdk.federated.validation import FederationError, UpdateLimits, move_problem

NAMES_KEY = "sensorveil-array-names"   # the global model's array names, in order, in the legacy round config
SHARES = 1.0                           # every sampled device holds a share of every other's key
THRESHOLD = 0.5                        # half the shares rebuild a dropped device's key (Flower's example)


def secure_aggregation_when_asked(msg, context, call_next):
    """Client mod: Flower's ``secaggplus_mod`` on a training message of the SecAgg+ protocol, else the
    handler alone."""
    from flwr.app.message_type import MessageType
    from flwr.client.mod import secaggplus_mod
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS
    if msg.metadata.message_type == MessageType.TRAIN and RECORD_KEY_CONFIGS in msg.content.config_records:
        return secaggplus_mod(msg, context, call_next)
    return call_next(msg, context)


def fitins_adapter(msg, context, call_next):
    """Client mod between ``secaggplus_mod`` and the mechanism's handler: a legacy FitIns in, the message
    the handler reads ("arrays" by name, "config"); its reply out as the legacy FitRes SecAgg+ masks."""
    if "fitins.parameters" not in msg.content.array_records:
        return call_next(msg, context)
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
    from flwr.common import Code, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.compat.common import recorddict_compat as compat
    fitins = compat.recorddict_to_fitins(msg.content, keep_input=True)
    config = dict(fitins.config)
    names = json.loads(str(config.pop(NAMES_KEY)))
    arrays = ArrayRecord({name: Array(np.asarray(values))
                          for name, values in zip(names, parameters_to_ndarrays(fitins.parameters), strict=True)})
    inner = Message(content=RecordDict({"arrays": arrays, "config": ConfigRecord(config)}), metadata=msg.metadata)
    reply = call_next(inner, context)
    if reply.has_error():
        return reply
    metrics = dict(next(iter(reply.content.metric_records.values())))
    updated = next(iter(reply.content.array_records.values()))
    fitres = FitRes(Status(Code.OK, "ok"), ndarrays_to_parameters([updated[name].numpy() for name in names]),
                    int(metrics["num-examples"]), metrics)
    return Message(compat.fitres_to_recorddict(fitres, keep_input=True), reply_to=msg)


def legacy_strategy(strategy, train_config, names: list, clients: int):
    """Flower's legacy FedAvg sampling the devices as ``strategy`` (a StrictRounds on FedAvg) does, its
    round config the message-API one plus the array names, its metrics the weighted mean."""
    from flwr.server.strategy import FedAvg as LegacyFedAvg

    def fit_config(server_round: int) -> dict:
        return {**dict(train_config), "server-round": server_round, NAMES_KEY: json.dumps(names)}

    def mean_metrics(results: list) -> dict:   # the devices' figures weighted by rows, and how many were summed
        total = sum(count for count, _ in results)
        keys = set.intersection(*(set(metrics) for _, metrics in results)) if results else set()
        return {"devices": len(results),
                **{key: sum(count * float(metrics[key]) for count, metrics in results) / total for key in keys}}

    sampled = max(int(clients * strategy.fraction_train), strategy.min_train_nodes)
    return LegacyFedAvg(fraction_fit=strategy.fraction_train, fraction_evaluate=0.0, min_fit_clients=sampled,
                        min_evaluate_clients=0, min_available_clients=strategy.min_available_nodes,
                        on_fit_config_fn=fit_config, fit_metrics_aggregation_fn=mean_metrics, accept_failures=False)


def run_secure_rounds(strategy, grid, initial_arrays, num_rounds: int, timeout: float, train_config,
                      evaluate_config, settings: dict):
    """``strategy.start``'s loop with SecAgg+ for training: per round Flower's SecAggPlusWorkflow, the
    aggregate checked (``check_aggregate``) and reported, then the strategy's own evaluation. Returns
    Flower's Result (``arrays``: the final global model)."""
    from flwr.server.compat.app_utils import start_update_client_manager_thread
    from flwr.server.workflow import SecAggPlusWorkflow
    from flwr.serverapp.strategy import Result
    context = legacy_context(strategy, initial_arrays, num_rounds, timeout, train_config)
    workflow = SecAggPlusWorkflow(SHARES, THRESHOLD, max_weight=settings["max_weight"],
                                  clipping_range=settings["clipping_range"], timeout=timeout)
    thread, stop, registered = start_update_client_manager_thread(grid, context.client_manager)
    registered.wait()
    result, arrays = Result(), initial_arrays
    try:
        for server_round in range(1, num_rounds + 1):
            arrays = result.arrays = secure_round(strategy, workflow, grid, context, arrays, server_round)
            if strategy.fraction_evaluate > 0:
                replies = grid.send_and_receive(strategy.configure_evaluate(server_round, arrays, evaluate_config,
                                                                           grid), timeout=timeout)
                strategy.aggregate_evaluate(server_round, replies)
    finally:
        stop.set()
        thread.join()
    return result


def legacy_context(strategy, initial_arrays, num_rounds: int, timeout: float, train_config):
    """The LegacyContext SecAggPlusWorkflow runs in: Flower's legacy FedAvg, an empty round state."""
    from flwr.app import ConfigRecord, Context, RecordDict
    from flwr.server import LegacyContext, ServerConfig
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD
    context = LegacyContext(Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={}),
                            config=ServerConfig(num_rounds=num_rounds, round_timeout=timeout),
                            strategy=legacy_strategy(strategy, train_config, list(initial_arrays.keys()),
                                                     strategy.min_available_nodes))
    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord()
    return context


def secure_round(strategy, workflow, grid, context, arrays, server_round: int):
    """One training round through SecAggPlusWorkflow; the new global model (an ArrayRecord), checked."""
    from flwr.app import Array, ArrayRecord
    from flwr.common import ndarrays_to_parameters
    from flwr.compat.common import recorddict_compat as compat
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key
    reference = {name: array.numpy() for name, array in arrays.items()}
    context.state.array_records[MAIN_PARAMS_RECORD] = compat.parameters_to_arrayrecord(
        ndarrays_to_parameters(list(reference.values())), keep_input=True)
    context.state.config_records[MAIN_CONFIGS_RECORD][Key.CURRENT_ROUND] = server_round
    strategy.started["train"] = time.time()
    workflow(grid, context)
    aggregate, metrics = secure_round_result(context, server_round, reference)
    check_aggregate(aggregate, reference, strategy.limits, server_round)
    strategy.sent["train"] = devices = int(metrics.pop("devices"))
    strategy._report("train", server_round, metrics, devices, [])
    return ArrayRecord({name: Array(np.ascontiguousarray(values)) for name, values in aggregate.items()})


def secure_round_result(context, server_round: int, reference: dict) -> tuple[dict, dict]:
    """(the round's aggregate by name in the global model's shapes and dtypes, its metrics and devices), or
    FederationError when SecAgg+ halted (too few devices answered a stage, a device failed)."""
    from flwr.common import parameters_to_ndarrays
    from flwr.compat.common import recorddict_compat as compat
    from flwr.server.workflow.constant import MAIN_PARAMS_RECORD
    history = context.history.metrics_distributed_fit
    if not history or not any(server_round == r for r, _ in next(iter(history.values()))):
        raise FederationError(f"round {server_round} (train): secure aggregation (SecAgg+) halted: a device failed "
                              "or too few answered one of its stages; nothing was aggregated")
    values = parameters_to_ndarrays(compat.arrayrecord_to_parameters(
        context.state.array_records[MAIN_PARAMS_RECORD], keep_input=True))
    aggregate = {name: np.asarray(v).reshape(expected.shape).astype(expected.dtype)
                 for (name, expected), v in zip(reference.items(), values, strict=True)}
    return aggregate, {key: float(series[-1][1]) for key, series in history.items() if key != "num-examples"}


def check_aggregate(aggregate: dict, reference: dict, limits: UpdateLimits, server_round: int) -> None:
    """What the server can still check under SecAgg+: the sum it learnt is finite and moves the model no
    further than ``max_update_ratio`` allows; else the round fails, nothing unchecked becomes the model."""
    bad = [name for name, values in aggregate.items() if not np.isfinite(values).all()]
    if bad:
        raise FederationError(f"round {server_round} (train): the securely aggregated model holds non-finite "
                              f"values in {bad}; it was not kept")
    moved = float(np.sqrt(sum(np.sum(np.square(aggregate[n].astype(np.float64) - reference[n].astype(np.float64)))
                              for n in reference)))
    problem = move_problem(moved, reference, limits)
    if problem is not None:
        raise FederationError(f"round {server_round} (train): the securely aggregated model fails its check: "
                              f"{problem}; it was not kept")
