"""PR-GAN's pieces against the paper: MED (eq. 3), Random*, losses (eq. 7-11), the section 6.4
choice, the Table 3 budget of the depth generator, and a real (small) training run."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sensorveil.sdk.mechanisms import prgan
from sensorveil.sdk.networks import depth_generator, make_classifier, make_generator
from sensorveil.sdk.priors import maximum_entropy_distribution, prior_guess_accuracies


def grad(net) -> float:
    return sum(float(p.grad.abs().sum()) for p in net.parameters() if p.grad is not None)


def test_med_equals_theta_where_known_and_spreads_the_rest_uniformly():
    theta = np.array([[0.5, np.nan, np.nan, 0.0], [np.nan] * 4])
    med = maximum_entropy_distribution(theta, 2, 4)
    np.testing.assert_allclose(med[0], [0.5, 0.25, 0.25, 0.0])      # c_y = 0.5 over k = 2
    np.testing.assert_allclose(med[1], [0.25] * 4)                   # nothing known: uniform
    np.testing.assert_allclose(maximum_entropy_distribution(None, 3, 5), np.full((3, 5), 0.2))
    with pytest.raises(ValueError, match="expected"):
        maximum_entropy_distribution(theta, 3, 4)


def test_random_star_matches_table2_for_the_mnist_prior():
    from sensorveil.sdk.datasets import load_dataset
    digits = load_dataset("digits")
    med = maximum_entropy_distribution(digits.prior("parity", "lt5"), 2, 2)
    guesses = prior_guess_accuracies(med, digits.attributes["parity"], digits.attributes["lt5"])
    assert guesses["random_star"] == pytest.approx(0.60, abs=0.01)    # Table 2: Random* 60.0 on MNIST


def test_choose_picks_the_most_private_setting_above_the_threshold():
    sweep = [{"val_acc_useful": 0.99, "val_acc_private": 0.9}, {"val_acc_useful": 0.96, "val_acc_private": 0.7},
             {"val_acc_useful": 0.90, "val_acc_private": 0.5}]
    assert prgan.choose(sweep, 0.95) == (1, True)
    assert prgan.choose(sweep, 0.995) == (0, False)


def loss_parts(variant):
    torch.manual_seed(0)
    G, D = make_generator("image", (1, 8, 8)), make_classifier("image", (1, 8, 8), 1)
    fixed = {"D_y": make_classifier("image", (1, 8, 8), 2), "D_z": make_classifier("image", (1, 8, 8), 2)}
    x = torch.rand(4, 1, 8, 8)
    y = torch.tensor([0, 1, 0, 1])
    med = torch.full((4, 2), 0.5)
    loss = prgan.generator_loss(variant, x, G(x), y, med, D, fixed, 0.0, prgan.PRGANConfig())
    loss.backward()
    return loss, D, fixed


def test_variants_drop_the_modules_the_paper_removes():
    _, D_prgan, fixed_prgan = loss_parts("prgan")
    _, D_ngp, _ = loss_parts("ngp")
    _, _, fixed_ap = loss_parts("ap")
    assert grad(D_prgan) > 0 and grad(D_ngp) == 0            # NGP: no GAN discriminator in L_G
    assert grad(fixed_prgan["D_y"]) > 0 and grad(fixed_ap["D_y"]) == 0   # AP: no D_y in L_Adv


def test_depth_generator_fits_table3_budget():
    from sensorveil.costs.torch_counts import torch_flops, torch_params
    G = depth_generator().eval()
    flops = torch_flops(G, torch.rand(1, 1, 180, 180))
    assert flops <= 96.4e6, flops                        # Table 3, OccuTherm: 96.4M FLOP
    assert torch_params(G) <= 420.3e3                    # and 420.3K parameters


def test_laplace_mechanism_is_random_unless_seeded():
    x = torch.full((2, 64), 0.5)
    a, b = prgan.laplace_privatize(0.1)(x), prgan.laplace_privatize(0.1)(x)
    assert not torch.equal(a, b)
    seeded = [prgan.laplace_privatize(0.1, seed=3)(x) for _ in range(2)]
    assert torch.equal(*seeded)
    noise = (prgan.laplace_privatize(0.05, seed=1)(torch.full((20000,), 0.5)) - 0.5)
    assert float(noise.abs().mean()) == pytest.approx(0.05, rel=0.1)    # E|Lap(b)| = b


@pytest.mark.slow
@pytest.mark.trains
def test_prgan_on_digits_fools_the_fixed_classifier_within_the_utility_threshold(tmp_path):
    """A real run: D_z's accuracy drops while D_y stays near its threshold; the probing attacker
    is measured and reported, whatever it finds."""
    from sensorveil.sdk.runs import train_run
    config = prgan.PRGANConfig(epochs=25, classifier_epochs=10, margin_fractions=(0.5,), utility_threshold=0.9,
                               progress=False)
    run_dir = train_run("prgan", "digits", out=tmp_path / "run", config=config, attacker_epochs=10)
    run = json.loads((run_dir / "run.json").read_text())
    ref, metrics = run["reference"], run["metrics"]
    assert ref["original_acc_private"] > 0.9
    assert metrics["protocol_acc_private"] < ref["original_acc_private"] - 0.1
    assert metrics["protocol_acc_useful"] > 0.9
    assert ref["random_star"] == pytest.approx(0.6, abs=0.03)
    assert metrics["probing_acc_useful"] > 0.9
    # the finding PASS's Table 1 predicts: attackers trained on PR-GAN's output still find lt5
    assert max(metrics["probing_acc_private"], metrics["tree_acc_private"]) > ref["random_star"] + 0.1


def test_depth_classifier_reads_heights_and_ignores_invalid_pixels():
    """The depth levels turn a head 2 cm higher into a visible change of the profile, and an invalid
    pixel (0, no return) adds nothing, where on raw depth it would look like the nearest surface."""
    import torch

    from sensorveil.sdk.networks import DepthLevels, make_classifier
    levels = DepthLevels()
    floor = torch.full((1, 1, 8, 8), 2800 / 4500)
    head = floor.clone()
    head[..., 3:5, 3:5] = 1100 / 4500
    taller = floor.clone()
    taller[..., 3:5, 3:5] = 1080 / 4500
    assert (levels(taller) - levels(head)).abs().amax() > 0.1
    holes = head.clone()
    holes[..., 0, 0] = 0.0
    assert not levels(holes)[..., 0, 0].any()
    net = make_classifier("depth", (1, 180, 180), 3).train()
    assert net(torch.rand(1, 1, 180, 180)).shape == (1, 3)   # a last batch of one still trains


def test_depth_histogram_reads_heights_and_ignores_invalid_pixels():
    """The cumulative depth histogram moves when a head is 2 cm higher (its step at ~1.09 m lies
    between), and a frame with no valid pixel has an empty histogram, not one of the nearest depths."""
    from sensorveil.sdk.networks import DepthHistogram
    histogram = DepthHistogram()
    floor = torch.full((1, 1, 8, 8), 2800 / 4500)
    head, taller = floor.clone(), floor.clone()
    head[..., 3:5, 3:5] = 1100 / 4500
    taller[..., 3:5, 3:5] = 1080 / 4500
    assert (histogram(taller) - histogram(head)).amax() > 0.01
    assert histogram(floor).amax() < 1e-3   # the floor lies beyond the last step
    assert not histogram(torch.zeros(1, 1, 8, 8)).any()


@pytest.mark.exports
def test_depth_classifier_exports_to_onnx_with_the_same_outputs(tmp_path):
    """D_z, the probing attackers and PASS's depth embedding f are this network: its max-pool, depth
    steps and profile go through the exporter's ONNX path and onnxruntime gives torch's answer."""
    ort = pytest.importorskip("onnxruntime")
    from sensorveil.export.onnx_export import export_onnx
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.training import to_model
    net = make_classifier("depth", (1, 180, 180), 20)
    torch.manual_seed(0)
    x = to_model(load_dataset("synthetic-depth", n_identities=2, samples_per_class=2))
    net.train()
    net(x)   # the profile's running statistics away from their initial (0, 1)
    net.eval()
    path = export_onnx(net, x[:1], tmp_path / "d.onnx")   # the exporter's own path, checked by onnx
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = net(x).numpy()
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], expected, rtol=1e-4, atol=1e-4)


def test_cosine_schedule_anneals_to_zero_and_reports_every_epoch():
    """train_classifier's cosine schedule ends at a learning rate of 0, so the last epochs settle
    instead of landing wherever a constant rate leaves them; on_epoch sees each epoch in eval mode."""
    import pytest
    import torch
    from torch import nn

    from sensorveil.sdk.training import train_classifier
    x = torch.randn(100, 4)
    labels = (x[:, 0] > 0).long().numpy()
    seen = []
    model = nn.Linear(4, 2)
    optimizer_lrs = []
    original_step = torch.optim.Adam.step

    def record_step(self, *args, **kwargs):
        optimizer_lrs.append(self.param_groups[0]["lr"])
        return original_step(self, *args, **kwargs)
    torch.optim.Adam.step = record_step
    try:
        train_classifier(model, x, labels, epochs=3, batch_size=10, progress=False, lr_schedule="cosine",
                         on_epoch=lambda m, epoch: seen.append((epoch, m.training)))
    finally:
        torch.optim.Adam.step = original_step
    assert seen == [(1, False), (2, False), (3, False)]
    assert optimizer_lrs[0] == pytest.approx(1e-3) and optimizer_lrs[-1] < 1e-5
    assert all(a >= b for a, b in zip(optimizer_lrs, optimizer_lrs[1:]))
    with pytest.raises(ValueError, match="lr_schedule must be one of"):
        train_classifier(model, x, labels, epochs=1, progress=False, lr_schedule="step")


def test_depth_runs_anneal_the_fixed_classifiers_and_other_datasets_keep_the_constant_rate():
    from sensorveil.sdk.mechanisms.prgan import default_config
    assert default_config("synthetic-depth", 0.95).classifier_lr_schedule == "cosine"
    assert default_config("digits", 0.95).classifier_lr_schedule == "constant"
