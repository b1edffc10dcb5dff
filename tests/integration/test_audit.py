"""The audit's arithmetic and its mechanism-specific attacker, on cases whose answers are known."""
from __future__ import annotations

import math

import numpy as np
import pytest

from sensorveil.sdk.audit import format_audit, interval


def test_interval_combines_seed_spread_and_test_sampling():
    figure = interval([0.70, 0.74], n_test=400)
    spread = np.var([0.70, 0.74], ddof=1) / 2
    half = 1.96 * math.sqrt(spread + 0.72 * 0.28 / 400)
    assert figure["mean"] == pytest.approx(0.72)
    assert (figure["low"], figure["high"]) == pytest.approx((0.72 - half, 0.72 + half))
    one = interval([0.5], n_test=100)                    # one seed: the binomial part alone
    assert one["high"] - one["mean"] == pytest.approx(1.96 * 0.05)
    assert interval([1.0, 1.0], 50)["high"] == 1.0       # clipped to [0, 1]


def test_exact_posterior_attacker_reads_the_private_class_off_the_bank_index():
    """A substitution that sends class-0 rows to substitute 0 and class-1 rows to substitute 1 reveals
    everything; one that sends everybody to the same mixture reveals only the majority class."""
    from types import SimpleNamespace

    from sensorveil.sdk.mechanisms.pass_substitution import exact_posterior_attacker
    labels = np.array([0, 1] * 50)
    data = SimpleNamespace(train_rows=np.arange(60), test_rows=np.arange(60, 100),
                           labels=lambda attr: labels, classes=lambda attr: 2)
    revealing = np.eye(2)[labels[:60]]
    assert (exact_posterior_attacker(data, "s", revealing, labels[60:])(0) == labels[60:]).all()
    uniform = np.full((60, 2), 0.5)
    draws = np.random.default_rng(0).integers(0, 2, 40)
    assert (exact_posterior_attacker(data, "s", uniform, draws)(0) == labels[60:]).mean() == pytest.approx(0.5)


def shifted_task(rng):
    """Two useful labels, three private classes, held in other shares by the test rows than by the
    training rows (a split by time), and data that says nothing but the useful label."""
    from sensorveil.sdk.evaluation import Task
    from sensorveil.sdk.priors import maximum_entropy_distribution
    train_shares = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]])
    test_shares = np.array([[0.1, 0.3, 0.6], [0.3, 0.5, 0.2]])
    useful = rng.integers(0, 2, 1200)
    shares = np.where(np.arange(1200)[:, None] < 600, train_shares[useful], test_shares[useful])
    private = np.array([rng.choice(3, p=p) for p in shares])
    theta = np.zeros((2, 3))
    np.add.at(theta, (useful[:600], private[:600]), 1.0)
    x = np.eye(2, dtype=np.float32)[useful] + rng.normal(0, 0.01, (1200, 2)).astype(np.float32)
    return Task(x=__import__("torch").as_tensor(x), useful=useful, private=private, n_useful=2, n_private=3,
                med=maximum_entropy_distribution(theta / theta.sum(1, keepdims=True), 2, 3),
                attacker_train=np.arange(600), test=np.arange(600, 1200), modality="vector")


def test_label_shift_weights_make_random_star_the_best_guess_from_the_useful_label():
    """Under the weights, no guess from the useful label alone beats Random* (it does on the plain test
    rows, where the shares moved), and the weighted rows hold the training part's shares."""
    from itertools import product

    from sensorveil.sdk.audit import label_shift_weights, score
    task = shifted_task(np.random.default_rng(0))
    weights = label_shift_weights(task)
    useful, private = task.useful[task.test], task.private[task.test]
    assert weights.mean() == pytest.approx(1.0)
    star = task.med.argmax(1)[useful]
    every_rule = [np.array(rule)[useful] for rule in product(range(3), repeat=2)]
    assert max(score(g, private, weights) for g in every_rule) == pytest.approx(score(star, private, weights))
    assert max(score(g, private) for g in every_rule) > score(star, private) + 0.2     # unweighted: no floor
    from sensorveil.sdk.audit import SHARE_PSEUDOCOUNT
    for u in range(2):
        rows = useful == u
        weighted = np.bincount(private[rows], weights=weights[rows], minlength=3) / weights[rows].sum()
        trained = np.bincount(task.private[task.attacker_train][task.useful[task.attacker_train] == u], minlength=3)
        smoothed = trained + SHARE_PSEUDOCOUNT      # the training shares with their pseudo-count per cell
        np.testing.assert_allclose(weighted, smoothed / smoothed.sum())


def test_a_class_the_training_part_never_shows_still_weighs_something():
    """With raw counts, test rows of a (useful, private) pair absent from the training part weighed 0,
    so a leak on exactly those people was never counted."""
    from sensorveil.sdk.audit import label_shift_weights
    task = shifted_task(np.random.default_rng(2))
    train = task.attacker_train[~((task.useful[task.attacker_train] == 0) & (task.private[task.attacker_train] == 2))]
    task.attacker_train = train
    weights = label_shift_weights(task)
    absent = (task.useful[task.test] == 0) & (task.private[task.test] == 2)
    assert absent.any() and (weights[absent] > 0).all() and (weights > 0).all()


@pytest.mark.trains
def test_audit_scores_a_useful_label_only_release_at_random_star_under_the_weights():
    """Attackers on a release that carries the useful label and nothing else: weighted, they sit at
    Random* and the goal is met; the plain scores beside them are kept."""
    import torch

    from sensorveil.sdk.audit import Release, audit, label_shift_weights
    task = shifted_task(np.random.default_rng(1))
    release = Release(task=task, train=task.x[task.attacker_train], test=task.x[task.test],
                      test_weights=label_shift_weights(task))
    result = audit(release, seeds=2, attacker_epochs=3, families=("trees", "logistic"))
    assert result["goal"]["strongest_within_5_points_of_random_star"]
    assert result["private"]["logistic"]["mean"] == pytest.approx(result["random_star"], abs=0.03)
    assert result["n_effective"] < len(task.test) and "unweighted" in result
    assert isinstance(result["unweighted"]["private"]["trees"]["mean"], float) and torch is not None
    # the data itself carries only the useful label: raw data meets the goal too, so the audit says it
    # cannot tell instead of "protects"
    assert result["power"]["has_power"] is False and result["verdict"] == "no power on this data"
    assert result["zero_weight_rows"] == 0
    # the raw-data utility row: the probe trained on raw rows, which here say the useful label and nothing else
    assert result["raw_useful"]["mean"] > 0.95 and "the same probe on RAW data" in format_audit(result, "t")
    # a release drawn on its useful label says its utility probe reads the label back
    assert "read back" not in format_audit(result, "t") and "useful_drawn_on_label" not in result
    assert "read back: each row drawn on its label" in format_audit({**result, "useful_drawn_on_label": True}, "t")


@pytest.mark.trains
def test_the_verdict_needs_an_audit_with_power():
    """Data that reveals the private attribute: released raw it leaks; replaced by noise it protects,
    and the verdict says "protects" only because raw data would have failed the goal."""
    import torch

    from sensorveil.sdk.audit import Release, audit
    rng = np.random.default_rng(3)
    task = shifted_task(rng)
    revealing = np.eye(3, dtype=np.float32)[task.private] + rng.normal(0, 0.05, (1200, 3)).astype(np.float32)
    task.x = torch.as_tensor(revealing)
    raw = audit(Release(task=task, train=task.x[task.attacker_train], test=task.x[task.test]), seeds=1,
                attacker_epochs=2, families=("trees", "logistic"))
    assert raw["verdict"] == "leaks" and raw["power"]["has_power"]
    noise = torch.as_tensor(rng.normal(0, 1, (1200, 3)).astype(np.float32))
    hidden = audit(Release(task=task, train=noise[task.attacker_train], test=noise[task.test]), seeds=1,
                   attacker_epochs=2, families=("trees", "logistic"))
    assert hidden["power"]["has_power"] and hidden["verdict"] in ("protects", "leaks")
    assert hidden["verdict"] == ("protects" if hidden["goal"]["strongest_within_5_points_of_random_star"] else "leaks")


@pytest.mark.trains
def test_the_re_id_attacker_learns_on_raw_data_and_reads_the_release():
    """The re-identification attacker trains on RAW rows and meets the released test rows: a
    release whose test rows still look raw is caught by it even though its own training rows teach the fresh
    attackers nothing; a release of noise is not."""
    import torch

    from sensorveil.sdk.audit import REID, Release, audit
    rng = np.random.default_rng(4)
    task = shifted_task(rng)
    revealing = np.eye(3, dtype=np.float32)[task.private] + rng.normal(0, 0.05, (1200, 3)).astype(np.float32)
    task.x = torch.as_tensor(revealing)
    noise = torch.as_tensor(rng.normal(0, 1, (1200, 3)).astype(np.float32))
    looks_raw = audit(Release(task=task, train=noise[task.attacker_train], test=task.x[task.test]), seeds=1,
                      attacker_epochs=5, families=("neural", "trees"))
    assert looks_raw["private"][REID]["mean"] > 0.9 and looks_raw["strongest_attacker"] == REID
    assert looks_raw["verdict"] == "leaks"
    hidden = audit(Release(task=task, train=noise[task.attacker_train], test=noise[task.test]), seeds=1,
                   attacker_epochs=5, families=("neural", "trees"))
    assert hidden["private"][REID]["mean"] < 0.6
    assert REID not in audit(Release(task=task, train=noise[task.attacker_train], test=noise[task.test]),
                             seeds=1, attacker_epochs=1, families=("trees",))["private"]


@pytest.mark.trains
def test_a_representation_release_measures_power_on_the_raw_rows_and_meets_no_re_id():
    """A release in another space than the raw rows (TAPPFL's r): the task it names holds r, the raw task stays
    beside it. Raw rows that reveal the private attribute give the audit its power even though r is noise (before,
    the power attackers trained on r and measured r's power, not the raw rows'); and no network trained
    on raw rows is run on r as a re-id attacker, even where r has the raw rows' width."""
    import dataclasses

    import torch

    from sensorveil.sdk.audit import REID, Release, audit
    rng = np.random.default_rng(5)
    task = shifted_task(rng)
    revealing = np.eye(3, dtype=np.float32)[task.private] + rng.normal(0, 0.05, (1200, 3)).astype(np.float32)
    task.x = torch.as_tensor(revealing)
    r = torch.as_tensor(rng.normal(0, 1, (1200, 3)).astype(np.float32))      # the raw rows' width, but no raw row
    released = dataclasses.replace(task, x=r, modality="vector")
    result = audit(Release(task=released, train=r[task.attacker_train], test=r[task.test], raw_task=task), seeds=1,
                   attacker_epochs=3, families=("neural", "trees"))
    assert result["raw_private"]["trees"]["mean"] > 0.9 and result["power"]["has_power"]
    assert REID not in result["private"] and result["verdict"] != "no power on this data"
    on_r_alone = audit(Release(task=released, train=r[task.attacker_train], test=r[task.test]), seeds=1,
                       attacker_epochs=3, families=("trees",))
    assert on_r_alone["raw_private"]["trees"]["mean"] < 0.6    # the old reading: "raw" attackers on r, not raw rows


@pytest.mark.trains
def test_the_omni_scale_reid_network_reads_camera_crops_and_learns_who_is_who():
    """The OSNet-like re-id network (sensorveil/sdk/reid_network.py): a batch of 128x64 crops in, one score
    per person out; a few steps on two people who differ only in the pattern of their clothes separate them."""
    import torch

    from sensorveil.sdk.reid_network import omni_scale_reid
    torch.manual_seed(0)
    net = omni_scale_reid(1, 2)
    assert net(torch.zeros(3, 1, 128, 64)).shape == (3, 2)
    stripes = torch.zeros(1, 128, 64)
    stripes[:, ::8] = 1.0                                   # one person's shirt: horizontal stripes
    checks = torch.zeros(1, 128, 64)
    checks[:, :, ::8] = 1.0                                 # the other's: vertical ones
    x = torch.stack([stripes, checks] * 8) + 0.05 * torch.randn(16, 1, 128, 64)
    y = torch.tensor([0, 1] * 8)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(30):
        loss = torch.nn.functional.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():          # batch norm's running statistics catch up with the trained weights
        for _ in range(30):
            net(x)
    net.eval()
    assert (net(x).argmax(1) == y).all()


@pytest.mark.trains
def test_an_audit_run_again_with_its_cache_reads_every_attacker_and_gives_the_same_figures(tmp_path):
    """A stopped audit resumes: the second run trains no attacker (each is read from the cache) and scores
    exactly what the first did; another identity (here other attacker epochs) shares nothing."""
    from sensorveil.sdk.audit import Release, audit
    from sensorveil.sdk.audit_cache import AttackerCache
    task = shifted_task(np.random.default_rng(5))
    release = Release(task=task, train=task.x[task.attacker_train], test=task.x[task.test])
    lines = []

    def run(epochs):
        cache = AttackerCache(tmp_path, {"release": "shifted", "attacker_epochs": epochs})
        return cache, audit(release, seeds=2, attacker_epochs=epochs, families=("trees", "logistic"),
                            log=lines.append, cache=cache)
    first_cache, first = run(2)
    assert first_cache.hits == 0 and not any("audit cache" in line for line in lines)
    lines.clear()
    second_cache, second = run(2)
    assert second_cache.hits == len(lines) > 0 and all("read from the audit cache" in line for line in lines)
    assert second["private"] == first["private"] and second["raw_private"] == first["raw_private"]
    other, _ = run(3)
    assert other.hits == 0 and other.directory != first_cache.directory


def test_the_audit_cache_keeps_tuples_and_leaves_no_half_written_entry(tmp_path):
    from sensorveil.sdk.audit_cache import AttackerCache
    cache = AttackerCache(tmp_path, {"k": 1})
    assert cache.get("raw-data neural (and re-id)", 0) is None
    cache.put("raw-data neural (and re-id)", 0, (np.arange(3), np.array([2, 1])))
    cache.put("trees", 1, np.array([0, 1, 1]))
    got = cache.get("raw-data neural (and re-id)", 0)
    assert isinstance(got, tuple) and [list(a) for a in got] == [[0, 1, 2], [2, 1]]
    assert list(cache.get("trees", 1)) == [0, 1, 1] and cache.get("trees", 0) is None
    assert not list(cache.directory.glob("*.partial*"))
