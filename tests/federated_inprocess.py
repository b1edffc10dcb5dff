"""A Flower Grid that delivers every message to a ClientApp in this process, one Context per node: the
strategies' own loops (SecAgg+'s four stages, the differential privacy wrapper) run message by message in
milliseconds, without Ray or network processes. The toy device adds its own step to the global model."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np

MODEL = {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "b": np.zeros(4, np.float32)}


def step_of(partition: int, arrays: dict) -> dict:
    """Device ``partition``'s update: a fixed step, different for every device."""
    rng = np.random.default_rng(partition)
    return {name: (0.1 * (partition + 1) * rng.standard_normal(value.shape)).astype(value.dtype)
            for name, value in arrays.items()}


def rows_of(partition: int) -> int:
    return 10 * (partition + 1)


def toy_train(msg, context):
    """@app.train(): the global model plus this device's step (scaled by node_config "scale"), its row count."""
    from flwr.app import Message, MetricRecord, RecordDict
    partition = int(context.node_config["partition-id"])
    arrays = {name: array.numpy() for name, array in msg.content["arrays"].items()}
    scale = float(context.node_config.get("scale", 1.0))
    new = {name: arrays[name] + scale * step for name, step in step_of(partition, arrays).items()}
    content = RecordDict({"arrays": named_record(new),
                          "metrics": MetricRecord({"num-examples": rows_of(partition), "loss": float(partition)})})
    return Message(content=content, reply_to=msg)


def named_record(arrays: dict):
    from flwr.app import Array, ArrayRecord
    return ArrayRecord({name: Array(np.ascontiguousarray(value)) for name, value in arrays.items()})


class InProcessGrid:
    """What Flower's strategies and SecAggPlusWorkflow use of a Grid, delivering in this process; every
    reply the server receives is kept in ``received``."""

    def __init__(self, client_app, node_configs: list):
        from flwr.app import Context, RecordDict
        from flwr.supercore.task_identity import TaskIdentity
        TaskIdentity.run_id, TaskIdentity.task_id, TaskIdentity.node_id = 1, 1, 0   # what a ServerApp process holds
        self.app, self.run = client_app, SimpleNamespace(run_id=1)
        self.contexts = {1000 + i: Context(run_id=1, node_id=1000 + i, node_config=config, state=RecordDict(),
                                           run_config={}) for i, config in enumerate(node_configs)}
        self.received = []

    def get_node_ids(self):
        return list(self.contexts)

    def send_and_receive(self, messages, *, timeout=None):
        replies = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = f"m{len(self.received)}"
            message.metadata.__dict__["_src_node_id"] = 0
            message.content = copy.deepcopy(message.content)   # a transport delivers a copy to each node
            replies.append(self.app(message, self.contexts[message.metadata.dst_node_id]))
        self.received.extend(replies)
        return replies


def toy_client_app():
    from sensorveil.sdk.federated.apps import flower_app_pair
    return flower_app_pair(lambda grid, spec: None, toy_train)["client_app"]


def run_rounds(node_configs: list, rounds: int = 2, **strategy_settings) -> tuple[dict, InProcessGrid, list]:
    """(the final global model, the grid, the progress reports) of a StrictFedAvg run in process."""
    from sensorveil.sdk.federated.strategy import strategy_class
    reports = []
    grid = InProcessGrid(toy_client_app(), node_configs)
    strategy = strategy_class("fedavg")(
        fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=len(node_configs),
        min_available_nodes=len(node_configs), progress=lambda *report: reports.append(report), **strategy_settings)
    result = strategy.start(grid=grid, initial_arrays=named_record(MODEL),
                            num_rounds=rounds, timeout=30)
    return {name: array.numpy() for name, array in result.arrays.items()}, grid, reports
