"""Checks on every device's reply before the server aggregates it.

Flower's strategies average whatever a device sends: one NaN makes the global model NaN, a claimed
"num-examples" of 1e12 makes one device the whole weighted average, and numpy broadcasts a (1,) array
over a layer without a word. A reply that fails any check here is dropped and its device named; the
strategy (federated.strategy) decides whether the round can go on with the rest.

The checks, for a training reply (an evaluation reply carries metrics only):

* exactly one ArrayRecord holding the global model's arrays, same names, shapes and dtypes (read from
  the decoded bytes, not only from the header the device wrote), every value finite;
* exactly one MetricRecord, every metric finite, and the weight key ("num-examples") an integer in
  [1, ``max_examples``]: the server sets the bound, since the device's own count is its claim;
* optionally, the distance the update moves the model at most ``max_update_ratio`` times the global
  model's norm. This is a sanity bound, not a statistical one: local SGD that moves a model by a
  hundred times its own size has diverged, and such an update outweighs every honest one in a mean;
* then, over the round: the distance each remaining update moves the model at most ``norm_multiple``
  times the median of those distances. This bound follows the honest updates: while most devices are
  honest the median is an honest device's step, so a device that scales its update up to just under
  the bound moves a mean of n updates by at most ``norm_multiple``/n honest steps, and as the honest
  steps shrink near convergence so does what it may send.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


class FederationError(RuntimeError):
    """A federated run failed: a device raised, did not answer, sent only invalid updates, or the Flower
    process exited badly."""

WEIGHT_KEY = "num-examples"


@dataclass(frozen=True)
class UpdateLimits:
    """What the server accepts from a device. ``max_examples`` None: no upper bound on the weight;
    ``max_update_ratio`` 0: no bound on the distance an update moves the model relative to the model's norm;
    ``norm_multiple`` 0: no bound relative to the round's median distance."""
    max_examples: int | None = None
    max_update_ratio: float = 0.0
    norm_multiple: float = 0.0

    def __post_init__(self):
        if self.max_examples is not None and self.max_examples < 1:
            raise ValueError(f"max_examples={self.max_examples}: expected an integer >= 1 (or None: no bound)")
        if not (self.max_update_ratio >= 0 and math.isfinite(self.max_update_ratio)):
            raise ValueError(f"max_update_ratio={self.max_update_ratio}: expected a finite number >= 0 (0: off)")
        if not (self.norm_multiple == 0 or (self.norm_multiple >= 1 and math.isfinite(self.norm_multiple))):
            raise ValueError(f"norm_multiple={self.norm_multiple}: expected a finite number >= 1 (0: off)")


@dataclass(frozen=True)
class Dropped:
    """A device whose reply was not aggregated, and why."""
    node: int
    reason: str

    def __str__(self) -> str:
        return f"node {self.node}: {self.reason}"

    def as_record(self) -> dict:
        return {"node": self.node, "reason": self.reason}


def split_replies(replies: list, reference: dict | None, limits: UpdateLimits,
                  weight_key: str = WEIGHT_KEY) -> tuple[list, list[Dropped]]:
    """(replies that pass every check, the devices dropped). ``reference``: the global model's arrays
    by name (numpy) for a training round, None for an evaluation round."""
    valid, moves, dropped = [], [], []
    for reply in replies:
        problem, moved = reply_problem(reply.content, reference, limits, weight_key)
        if problem is None:
            valid.append(reply)
            moves.append(moved)
        else:
            dropped.append(Dropped(int(reply.metadata.src_node_id), problem))
    if reference is None or not limits.norm_multiple:
        return valid, dropped
    kept = []
    for reply, problem in zip(valid, median_bound_problems(moves, limits.norm_multiple)):
        if problem is None:
            kept.append(reply)
        else:
            dropped.append(Dropped(int(reply.metadata.src_node_id), problem))
    return kept, dropped


def median_bound_problems(moves: list, multiple: float) -> list:
    """Per update, why it moves the model too far for this round (more than ``multiple`` times the median
    distance of the round's updates), or None. A round whose median is 0 bounds nothing."""
    if not moves:
        return []
    median = float(np.median(moves))
    bound = multiple * median
    return [None if median == 0 or moved <= bound else
            f"the update moves the model by {moved:.3g}, more than norm_multiple={multiple:g} times the round's "
            f"median update ({median:.3g}), {bound:.3g}" for moved in moves]


def reply_problem(content, reference: dict | None, limits: UpdateLimits, weight_key: str) -> tuple:
    """(why this reply cannot be aggregated or None, the distance it moves the model or None)."""
    try:
        problem = metrics_problem(content, limits, weight_key)
        if problem is not None or reference is None:
            return problem, None
        return arrays_problem(content, reference, limits)
    except Exception as error:   # a reply that cannot even be decoded is a bad reply, not a server crash
        return f"unreadable reply ({type(error).__name__}: {error})", None


def metrics_problem(content, limits: UpdateLimits, weight_key: str) -> str | None:
    records = list(content.metric_records.values())
    if len(records) != 1:
        return f"{len(records)} MetricRecords, expected 1"
    metrics = records[0]
    if weight_key not in metrics:
        return f"no {weight_key!r} metric"
    count = metrics[weight_key]
    if isinstance(count, bool) or not isinstance(count, (int, float)) or not math.isfinite(count) \
            or int(count) != count:
        return f"{weight_key}={count!r} is not an integer"
    top = limits.max_examples
    if count < 1 or (top is not None and count > top):
        return f"{weight_key}={count:g} outside [1, {top if top is not None else 'inf'}]"
    for name, value in metrics.items():
        values = value if isinstance(value, list) else [value]
        if not all(math.isfinite(float(v)) for v in values):
            return f"metric {name!r} is not finite"
    return None


def arrays_problem(content, reference: dict, limits: UpdateLimits) -> tuple:
    """(why the arrays cannot be aggregated or None, the distance they move the model)."""
    records = list(content.array_records.values())
    if len(records) != 1:
        return f"{len(records)} ArrayRecords, expected 1", None
    record = records[0]
    if set(record.keys()) != set(reference):
        missing, extra = sorted(set(reference) - set(record.keys())), sorted(set(record.keys()) - set(reference))
        return f"arrays differ from the global model's (missing {missing}, unexpected {extra})", None
    squared = 0.0
    for name, expected in reference.items():
        values = record[name].numpy()
        if values.shape != expected.shape or values.dtype != expected.dtype:
            return (f"array {name!r} is {values.dtype}{list(values.shape)}, expected "
                    f"{expected.dtype}{list(expected.shape)}"), None
        bad = int(values.size - np.count_nonzero(np.isfinite(values)))
        if bad:
            return f"array {name!r} holds {bad} non-finite values (NaN or inf)", None
        with np.errstate(over="ignore"):
            squared += float(np.sum(np.square(values.astype(np.float64) - expected.astype(np.float64))))
    moved = math.sqrt(squared)
    return move_problem(moved, reference, limits), moved


def move_problem(moved: float, reference: dict, limits: UpdateLimits) -> str | None:
    if not limits.max_update_ratio:
        return None
    scale = math.sqrt(sum(float(np.sum(np.square(a.astype(np.float64)))) for a in reference.values()))
    bound = limits.max_update_ratio * max(scale, 1.0)   # a model near zero still gets room to move
    if not moved <= bound:
        return (f"the update moves the model by {moved:.3g}, more than max_update_ratio={limits.max_update_ratio:g} "
                f"times the global model's norm ({bound:.3g})")
    return None


def too_few_message(server_round: int, stage: str, valid: int, sent: int, needed: int,
                    dropped: list[Dropped]) -> str:
    """The one error of a round that cannot go on: how many were valid, and every device dropped."""
    named = "; ".join(str(d) for d in dropped)
    return (f"round {server_round} ({stage}): only {valid} of {sent} device updates are valid, fewer than "
            f"min_valid_replies={needed}; dropped {len(dropped)}: {named}")
