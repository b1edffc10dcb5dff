"""(epsilon, delta) of the Gaussian noise a federation adds to each round's aggregate, by Renyi differential
privacy (RDP). No accountant package is a dependency: Flower's own (``flwr[dp]``) needs dp-accounting, whose
dm-tree is a compiled package, so the two formulas it rests on are written here, with their sources.

* One release of the sampled Gaussian mechanism (sampling rate q, noise multiplier sigma: the noise's
  standard deviation over the sensitivity) is (alpha, eps_alpha)-RDP with, at integer orders alpha >= 2
  (Mironov, Talwar and Zhang 2019, "Renyi Differential Privacy of the Sampled Gaussian Mechanism",
  section 3.3):

      eps_alpha = log(sum_{k=0..alpha} C(alpha, k) (1 - q)^(alpha - k) q^k exp((k^2 - k) / (2 sigma^2))) / (alpha - 1)

  At q = 1 the sum keeps its last term only, alpha / (2 sigma^2): the plain Gaussian mechanism (Mironov 2017,
  "Renyi Differential Privacy", table 2), which holds at every real order alpha > 1.
* RDP adds up over releases (Mironov 2017, proposition 1), and (alpha, R)-RDP gives (epsilon, delta)-DP with
  epsilon = R + log(1 / delta) / (alpha - 1) (Mironov 2017, proposition 3); the accountant reports the least
  epsilon over its orders.
"""
from __future__ import annotations

import math

import numpy as np

INTEGER_ORDERS = tuple(range(2, 65)) + (80, 96, 128, 192, 256, 384, 512, 1024)
FRACTIONAL_ORDERS = (1.1, 1.25, 1.5, 1.75, 2.5, 3.5)   # only where the closed form holds (q = 1)


def gaussian_rdp(noise_multiplier: float, order: float, sampling_rate: float = 1.0) -> float:
    """eps_alpha of one release of the sampled Gaussian mechanism (module docstring)."""
    if not noise_multiplier > 0 or not 0 < sampling_rate <= 1:
        raise ValueError(f"noise_multiplier={noise_multiplier}, sampling_rate={sampling_rate}: expected a noise "
                         "multiplier > 0 and a sampling rate in (0, 1]")
    if sampling_rate == 1.0:
        return order / (2 * noise_multiplier ** 2)
    if order != int(order):
        raise ValueError(f"order={order}: the sampled Gaussian's formula here holds at integer orders")
    alpha = int(order)
    k = np.arange(alpha + 1, dtype=np.float64)
    log_binomial = math.lgamma(alpha + 1) - np.array([math.lgamma(i + 1) + math.lgamma(alpha - i + 1) for i in k])
    log_terms = (log_binomial + (alpha - k) * math.log1p(-sampling_rate) + k * math.log(sampling_rate)
                 + (k * k - k) / (2 * noise_multiplier ** 2))
    top = float(np.max(log_terms))
    return (top + math.log(float(np.sum(np.exp(log_terms - top))))) / (alpha - 1)


def epsilon_for(noise_multipliers: list, delta: float, sampling_rate: float = 1.0) -> tuple[float, float]:
    """(epsilon, the order that gives it) after one release per entry of ``noise_multipliers`` at ``delta``."""
    if not 0 < delta < 1:
        raise ValueError(f"delta={delta}: expected a number in (0, 1)")
    if not noise_multipliers:
        return 0.0, float("nan")
    orders = INTEGER_ORDERS + (FRACTIONAL_ORDERS if sampling_rate == 1.0 else ())
    best = (math.inf, float("nan"))
    for order in orders:
        rdp = sum(gaussian_rdp(sigma, order, sampling_rate) for sigma in noise_multipliers)
        epsilon = rdp + math.log(1 / delta) / (order - 1)
        if epsilon < best[0]:
            best = (epsilon, float(order))
    return best
