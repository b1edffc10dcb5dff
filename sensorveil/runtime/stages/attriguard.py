"""AttriGuard on the device (Jia and Gong, USENIX Security 2018): numpy only, and the one
implementation the sdk trains and evaluates with too.

Phase I (section 4.2, Algorithm 1, PANDA): for every attribute value i, the smallest noise r_i (L0)
that makes the defender's classifier C infer i, following the noise-type policy. Phase II (section
4.3): the mechanism M* over {r_1 .. r_m} that minimises KL(p || M) under the expected-L0 budget beta
(eq. 3), from its KKT conditions (eq. 7-10). The stage then draws i ~ M* with the Privatizer's
generator (OS entropy unless seeded) and releases x + r_i.

C is LR-D, multinomial logistic regression: C(x) = softmax(W x + b), whose gradient is closed form,
dC_i/dx = C_i (W_i - sum_k C_k W_k). Its decisions (argmax) come from the bundle's exported graph run
by the backend, so the device's own model decides; the gradient uses the same weights as arrays.

Runs on the boards' Python 3.6 with numpy 1.19: no annotations import, no dataclasses.
"""
import numpy as np

from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.manifest_fields import fail, need_integer, need_listed, need_number, need_text, optional
from sensorveil.runtime.stages.base import MODEL_UNITS, Stage, validate_graph_name

POLICIES = ("modify_exist", "add_new", "modify_add")
ARRAY_ROLES = ("weights", "bias", "target")     # the bundle arrays of LR-D and of the target distribution p
# PANDA's step and maxiter where a manifest leaves them out (section 5.1.3); the sdk's settings start here too
DEFAULT_TAU = 1.0
DEFAULT_MAX_ITERATIONS = 100
CHUNK = 64            # samples per Phase I batch: m rows each, so memory stays bounded for m ~ 100


def softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=1, keepdims=True)


def confidence_gradient(x, weights, bias, targets):
    """dC_i(x)/dx for each row's target i, with C = softmax(W x + b): C_i (W_i - sum_k C_k W_k)."""
    confidence = softmax(x @ weights.T + bias)
    expected_w = confidence @ weights
    rows = np.arange(len(x))
    return confidence[rows, targets][:, None] * (weights[targets] - expected_w)


def allowed_entries(x, policy):
    """Policy A, Modify_Exist: the non-zero entries; policy B, Add_New: the zero entries (section 3.1;
    Algorithm 1 line 4 prints x_j != 0 for Add_New too, which contradicts the policy's definition);
    policy C, Modify_Add: every entry."""
    if policy == "modify_exist":
        return x != 0
    if policy == "add_new":
        return x == 0
    return np.ones(x.shape, dtype=bool)


def panda(x, targets, decide, weights, bias, policy="modify_add", tau=DEFAULT_TAU,
          max_iterations=DEFAULT_MAX_ITERATIONS):
    """Algorithm 1 for every row at once: ``x`` (rows, d) in [0, 1], ``targets`` the value i per row,
    ``decide(batch)`` the classifier's inferred value per row. Returns (x_bar, reached)."""
    if policy not in POLICIES:
        raise ValueError("unknown noise-type policy {!r}; expected one of {}".format(policy, POLICIES))
    x_bar = np.array(x, dtype=np.float32)
    allowed = allowed_entries(x, policy)
    active = decide(x_bar) != targets
    for _ in range(max_iterations + 1):          # "while C(x_bar) != i and t <= maxiter"
        rows = np.flatnonzero(active)
        if len(rows) == 0:
            break
        step(x_bar, rows, allowed[rows], confidence_gradient(x_bar[rows], weights, bias, targets[rows]),
             policy, tau)
        active[rows] = decide(x_bar[rows]) != targets[rows]
    return x_bar, ~active


def step(x_bar, rows, allowed, gradient, policy, tau):
    """Lines 3-21 of Algorithm 1 for the given rows of x_bar (changed in place)."""
    current = x_bar[rows]
    if policy == "add_new":                                                     # line 4
        gain_inc = np.where(allowed, gradient, -np.inf)
    else:                                                                       # lines 7, 11
        gain_inc = np.where(allowed, (1 - current) * gradient, -np.inf)
    gain_dec = np.where(allowed, -current * gradient, -np.inf)                  # lines 8, 12
    e_inc, e_dec = gain_inc.argmax(axis=1), gain_dec.argmax(axis=1)
    index = np.arange(len(rows))
    v_inc = (1 - current[index, e_inc]) * gradient[index, e_inc]                # line 15
    v_dec = -current[index, e_dec] * gradient[index, e_dec]                     # line 16
    increase = np.full(len(rows), True) if policy == "add_new" else v_inc >= v_dec   # line 17
    inc_rows, dec_rows = rows[increase], rows[~increase]
    x_bar[inc_rows, e_inc[increase]] = np.clip(x_bar[inc_rows, e_inc[increase]] + tau, 0, 1)       # line 18
    x_bar[dec_rows, e_dec[~increase]] = np.clip(x_bar[dec_rows, e_dec[~increase]] - tau, 0, 1)     # line 20


def phase_one(x, decide, weights, bias, policy, tau, max_iterations):
    """r_1 .. r_m for each sample: noised samples (n, m, d) and whether each target was reached.
    Where Modify_Exist or Add_New find no r_i, the search extends to Modify_Add (section 4.2)."""
    n, m = len(x), len(bias)
    rows = np.repeat(x, m, axis=0)
    targets = np.tile(np.arange(m), n)
    noised, reached = panda(rows, targets, decide, weights, bias, policy, tau, max_iterations)
    if policy != "modify_add" and not reached.all():
        missed = np.flatnonzero(~reached)
        noised[missed], reached[missed] = panda(rows[missed], targets[missed], decide, weights, bias,
                                                "modify_add", tau, max_iterations)
    return noised.reshape(n, m, -1), reached.reshape(n, m)


def kkt_mechanism(p, l0, beta, iterations=60):
    """M* of eq. 3 for each row of ``l0`` (n, m), the L0 norms of r_1 .. r_m; ``p`` (n, m) the target
    distribution (zero where r_i was not found). Eq. 8: M_i = p_i / (mu0 ||r_i||_0 + lambda), eq. 10:
    mu0 = (1 - lambda) / beta, and lambda solves eq. 9, sum_i M_i ||r_i||_0 = beta, by Newton's method
    kept inside the bracket (0, 1] by bisection. When the budget does not bind (sum p_i ||r_i||_0 <=
    beta), mu0 = 0 and M* = p (section 4.3's interpretation)."""
    p = np.asarray(p, dtype=np.float64)
    p = p / p.sum(axis=1, keepdims=True)
    l0 = np.asarray(l0, dtype=np.float64)
    mechanism = p.copy()
    if beta <= 0:       # no noise allowed: the zero-noise value(s), i.e. what C infers already
        free = p * (l0 == 0)
        return free / np.maximum(free.sum(axis=1, keepdims=True), 1e-300)
    binding = (p * l0).sum(axis=1) > beta
    if binding.any():
        mechanism[binding] = _solve_lambda(p[binding], l0[binding], beta, iterations)
    return mechanism


def _solve_lambda(p, l0, beta, iterations):
    """Rows where the budget binds. g(lambda) = sum_i p_i l_i / (l_i (1 - lambda) / beta + lambda) - beta
    has g(0+) < 0 (the inferred value costs nothing) and g(1) > 0 (binding), so a root lies in (0, 1)."""
    low, high = np.zeros(len(p)), np.ones(len(p))
    lam = np.full(len(p), 0.5)
    for _ in range(iterations):
        denominator = l0 * (1 - lam[:, None]) / beta + lam[:, None]
        g = (p * l0 / denominator).sum(axis=1) - beta
        slope = -(p * l0 * (1 - l0 / beta) / denominator ** 2).sum(axis=1)
        low, high = np.where(g < 0, lam, low), np.where(g >= 0, lam, high)
        newton = lam - g / np.where(slope == 0, np.inf, slope)
        inside = (newton > low) & (newton < high)
        lam = np.where(inside, newton, (low + high) / 2)
    mu0 = (1 - lam) / beta
    mechanism = p / (mu0[:, None] * l0 + lam[:, None])
    return mechanism / mechanism.sum(axis=1, keepdims=True)


def draw(mechanism, rng):
    """One value i ~ M* per row, by inverse CDF."""
    cdf = np.cumsum(mechanism, axis=1)
    u = rng.random((len(mechanism), 1)) * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=1), mechanism.shape[1] - 1)


def attriguard(x, decide, weights, bias, target, beta, policy="modify_add", tau=DEFAULT_TAU,
               max_iterations=DEFAULT_MAX_ITERATIONS, rng=None):
    """The whole mechanism on a batch of flat samples in [0, 1]: Phase I, Phase II, one draw each."""
    rng = rng if rng is not None else np.random.default_rng()
    out = np.empty(x.shape, dtype=np.float32)
    for start in range(0, len(x), CHUNK):
        chunk = x[start:start + CHUNK]
        noised, reached = phase_one(chunk, decide, weights, bias, policy, tau, max_iterations)
        l0 = (noised != chunk[:, None, :]).sum(axis=2)
        p = np.where(reached, target[None, :], 0.0)
        chosen = draw(kkt_mechanism(p, l0, beta), rng)
        out[start:start + CHUNK] = noised[np.arange(len(chunk)), chosen]
    return out


def need_step(where, path, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        fail(where, path, value, "a step in (0, 1]: PANDA moves entries of samples in [0, 1]")


def check_arrays(root, weights, bias, target):
    """LR-D's weights must be finite (its gradient steers the noise) and the target distribution p a
    distribution: finite, non-negative, with mass; an all-zero or NaN p leaves every sample unnoised."""
    if not (np.isfinite(weights).all() and np.isfinite(bias).all()):
        raise BundleError("{}: attriguard weights or bias hold NaN or inf; expected the defender's finite "
                          "classifier".format(root))
    if not np.isfinite(target).all() or (target < 0).any() or not target.sum() > 0:
        raise BundleError("{}: attriguard target {}; expected a distribution over the private values "
                          "(finite, non-negative, positive sum)".format(root, np.array2string(target, precision=3)))


class AttriGuardEntry(object):
    """What the sdk writes for the mechanism, read back by :class:`AttriGuardStage`: LR-D's graph, the
    budget and PANDA's settings, and ``arrays``, the bundle files of LR-D's weights and bias and of the
    target distribution p by role ("weights", "bias", "target")."""

    def __init__(self, graph, arrays, beta, policy, tau=DEFAULT_TAU, max_iterations=DEFAULT_MAX_ITERATIONS):
        self.graph, self.arrays, self.beta, self.policy = graph, dict(arrays), beta, policy
        self.tau, self.max_iterations = tau, max_iterations

    def to_manifest(self):
        entry = {"kind": AttriGuardStage.kind, "graph": self.graph, "policy": self.policy, "beta": self.beta,
                 "tau": self.tau, "max_iterations": self.max_iterations}
        entry.update((role, self.arrays[role]) for role in ARRAY_ROLES)
        return entry


class AttriGuardStage(Stage):
    """``{"kind": "attriguard", "graph", "weights", "bias", "target", "beta", "policy", "tau",
    "max_iterations"}``: model units in (any sample shape, flattened), model units out."""

    kind = "attriguard"
    emits = MODEL_UNITS

    @classmethod
    def validate_fields(cls, where, path, stage, manifest):
        validate_graph_name(where, path + ".graph", stage.get("graph"), manifest)
        for key in ARRAY_ROLES:
            need_listed(where, path + "." + key, stage.get(key), manifest["files"])
        need_number(where, path + ".beta", stage.get("beta"), positive=True)
        need_text(where, path + ".policy", stage.get("policy"), POLICIES)
        # PANDA's step moves one entry of a sample in [0, 1]: 0 never moves it (the raw input is released)
        optional(stage, "tau", need_step, where, path + ".tau", stage.get("tau"))
        optional(stage, "max_iterations", need_integer, where, path + ".max_iterations", stage.get("max_iterations"),
                 1, 1 << 20)

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        self.weights = context.array(self.require("weights")).astype(np.float32)
        self.bias = context.array(self.require("bias")).astype(np.float32)
        self.target = context.array(self.require("target")).astype(np.float64)
        check_arrays(context.bundle.root, self.weights, self.bias, self.target)
        if self.weights.ndim != 2 or self.bias.shape != (len(self.weights),) or self.target.shape != self.bias.shape:
            raise BundleError("{}: attriguard arrays disagree: weights {}, bias {}, target {}; expected (m, d), "
                              "(m,), (m,)".format(context.bundle.root, self.weights.shape, self.bias.shape,
                                                  self.target.shape))
        self.beta, self.policy = float(self.require("beta")), str(self.require("policy"))
        self.tau = float(spec.get("tau", DEFAULT_TAU))
        self.max_iterations = int(spec.get("max_iterations", DEFAULT_MAX_ITERATIONS))
        if self.policy not in POLICIES:
            raise BundleError("{}: attriguard policy {!r}; expected one of {}".format(
                context.bundle.root, self.policy, POLICIES))
        self.run_graph = context.graph(self.require("graph"))

    def __call__(self, batch, rng):
        sample_shape = batch.shape[1:]

        def decide(flat):     # the exported LR-D takes samples in the bundle's model layout
            return self.run_graph(flat.reshape((len(flat),) + sample_shape).astype(np.float32)).argmax(axis=1)
        flat = batch.reshape(len(batch), -1)
        out = attriguard(flat, decide, self.weights, self.bias, self.target, self.beta, self.policy,
                         self.tau, self.max_iterations, rng)
        return out.reshape(batch.shape)
