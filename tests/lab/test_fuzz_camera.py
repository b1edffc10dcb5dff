"""scripts/fuzz_camera.py's pieces: its raw check fires on a released camera frame, and every frame mutation
makes the odd frame it names (the fuzz itself runs in CI's own bounded step)."""
import numpy as np

from tests.conftest import load_script


def test_the_raw_check_fires_on_the_camera_and_not_on_the_neutral_scene():
    fuzz = load_script("fuzz_camera")
    raw = np.random.default_rng(0).integers(0, 256, (36, 48, 3), dtype=np.uint8)
    assert fuzz.raw_share(raw, raw.copy()) == 1.0
    assert fuzz.raw_share(raw, np.full_like(raw, 128)) < fuzz.RAW_SHARE
    assert fuzz.raw_share(raw, raw[:, :40]) == 0.0


def test_every_frame_mutation_makes_an_odd_frame():
    fuzz = load_script("fuzz_camera")
    frames = [np.full((36, 48, 3), k, np.uint8) for k in range(6)]
    for how in fuzz.FRAME_MUTATIONS:
        mutated = fuzz.mutate_frames(frames, how, np.random.default_rng(1))
        odd = [f for f in mutated if f.shape != (36, 48, 3) or f.dtype != np.uint8 or (f == 200).all()]
        assert odd, how
        assert len(mutated) == len(frames) and all(f.shape == (36, 48, 3) for f in frames)   # originals kept
