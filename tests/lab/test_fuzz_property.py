"""Property (the fail-closed rule): whatever single mutation a bundle's manifest, arrays or input
take, the runtime either refuses it with its own error or releases finite, in-range, privatized output.
The mutations are sensorveil_lab.bundle_fuzz's (scripts/fuzz_bundles.py runs them); hypothesis picks and
shrinks them. .ci/run runs the script itself on more cases and on trained Sanitizer and AttriGuard bundles too."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sensorveil_lab import bundle_fuzz as FUZZ


@pytest.mark.parametrize("seed_bundle", FUZZ.SEED_BUNDLES)
def test_every_mutation_is_refused_or_released_safely(seed_bundle, tmp_path_factory):
    work = tmp_path_factory.mktemp("fuzz")

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(0, 2 ** 32 - 1))
    def check(case_seed):
        result = FUZZ.one_case(FUZZ.FIXTURES / seed_bundle, work, np.random.default_rng(case_seed))
        assert result["outcome"] != "finding", result
    check()


def test_the_judge_flags_a_raw_release_and_nan():
    """The fuzzer's verdicts can fail: a pass-through output and a NaN output are findings."""
    from sensorveil.runtime import Privatizer
    p = Privatizer.load(FUZZ.FIXTURES / "schema1-prgan-digits-onnx")
    x = np.full((2, 8, 8), 3.0, np.float32)
    assert FUZZ.check_release(p, x, x.copy()) == ("finding", "released the input unchanged")
    assert FUZZ.check_release(p, x, np.full_like(x, np.nan))[0] == "finding"
    assert FUZZ.check_release(p, x, np.full_like(x, 99.0))[0] == "finding"
    assert FUZZ.check_release(p, x, np.full_like(x, 5.0)) == ("released", None)
