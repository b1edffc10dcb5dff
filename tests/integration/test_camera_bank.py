"""Who a camera release shows: the substitute bank. By default walkers sensorveil draws itself (no real person
of any camera); a consented clip, or the camera's own bystanders, only when named; the bundle says which."""
from pathlib import Path

import numpy as np
import pytest

from sensorveil.runtime.camera import CROP_SHAPE
from tests.integration.test_camera import walkway


def test_rendered_walkers_are_one_upright_person_each_facing_the_way_they_walk():
    import cv2

    from sensorveil.sdk.datasets.rendered_people import render_walkers
    drawn = render_walkers(6, 4, CROP_SHAPE, seed=3)
    assert drawn["x"].shape == (6 * 2 * 4,) + CROP_SHAPE and drawn["colour"].shape == drawn["x"].shape + (3,)
    for mask in drawn["foreground"]:
        count, _, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
        assert count == 2                                   # one blob: a whole person, no detached head
        x, y, w, h, area = stats[1]
        assert 0.6 * CROP_SHAPE[0] <= h <= 0.85 * CROP_SHAPE[0] and 1.8 <= h / w <= 6.0
    # each walker walks right (1) then, mirrored, left (0), phase by phase, one sequence per direction
    right, left = drawn["foreground"][:4], drawn["foreground"][4:8]
    assert (drawn["direction"][:8] == [1] * 4 + [0] * 4).all() and (left == right[:, :, ::-1]).all()
    assert len(np.unique(drawn["sequence"])) == 12 and not (right[0] == right[1]).all()   # the legs move
    # a cut-out reserves 0 for "not the person"
    assert (drawn["colour"][drawn["foreground"]] > 0).all() and (drawn["colour"][~drawn["foreground"]] == 0).all()
    # random clothing: the walkers do not share one colour
    tops = {tuple(drawn["colour"][8 * k][40, 32]) for k in range(6)}
    assert len(tops) >= 4


def test_the_default_bank_holds_no_person_of_the_clip_and_says_so():
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.mechanisms.pass_parts.data import prepare_data
    data = load_dataset("walkway", walkway(), stride=8)
    split, track = data.attributes["trial_split"], data.attributes["track"]
    bank = np.flatnonzero(split == 2)
    assert len(bank) > 500 and data.camera["bank"]["source"] == "rendered"
    assert data.camera["bank"]["real_people"] is False and "no real person" in data.camera["bank"]["people"]
    assert not set(track[bank]) & set(track[split < 2])     # the bank's walkers are no track of the clip
    pdata = prepare_data(data, "direction", "appearance", condition="direction")
    assert np.isin(pdata.bank_rows, bank).all()             # every substitute a rendered walker
    assert not np.isin(bank, pdata.train_rows).any() and not np.isin(bank, pdata.test_rows).any()
    assert set(data.attributes["direction"][pdata.bank_rows]) == {0, 1}


def test_the_clip_bank_is_the_cameras_own_people_only_when_named():
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.mechanisms.pass_parts.data import prepare_data
    data = load_dataset("walkway", walkway(), stride=8, bank="clip")
    assert 2 not in data.attributes["trial_split"]
    assert data.camera["bank"] == {"source": "clip", "real_people": True, "bystanders": True,
                                   "people": "this camera's own people (walkway.avi, training part)"}
    pdata = prepare_data(data, "direction", "appearance")
    assert np.isin(pdata.bank_rows, pdata.train_rows).all()
    consented = load_dataset("walkway", walkway(), stride=8, bank="consented", bank_clip=walkway())
    source = consented.camera["bank"]
    assert source["source"] == "consented" and source["real_people"] and not source["bystanders"]
    assert len(source["sha256"]) == 64 and source["clip"] == "walkway.avi"
    with pytest.raises(ValueError, match="bank_clip names the consented footage"):
        load_dataset("walkway", walkway(), stride=8, bank="consented")
    with pytest.raises(ValueError, match="bank 'bystanders'; expected one of"):
        load_dataset("walkway", walkway(), stride=8, bank="bystanders")


def test_a_screened_bank_is_recorded_by_the_walkers_it_kept_and_reloads_without_the_screen(tmp_path, monkeypatch):
    from sensorveil.sdk.datasets import bank_screen, load_dataset
    from sensorveil.sdk.runs import recorded_options
    detector = tmp_path / "detector.onnx"
    detector.write_bytes(b"a detector's bytes")
    from sensorveil.runtime.bundle import sha256_of
    outcome = {"detector": detector.name, "candidates": 64, "kept": 20, "share": 0.85,
               "clip_sha256": sha256_of(Path(walkway()))}
    monkeypatch.setattr(bank_screen, "_SCREENED", {})
    monkeypatch.setattr(bank_screen, "_screen", lambda *args: (np.arange(3, 23), dict(outcome)))
    options = {"stride": 8, "bank_screen": str(detector)}
    data = load_dataset("walkway", walkway(), **options)
    recorded = recorded_options(options, data)
    assert "bank_screen" not in recorded and recorded["bank_screened"]["kept_walkers"] == list(range(3, 23))

    def no_screen(*args):
        raise AssertionError("a recorded screen ran again")
    monkeypatch.setattr(bank_screen, "_screen", no_screen)
    monkeypatch.setattr(bank_screen, "_SCREENED", {})
    again = load_dataset("walkway", walkway(), **recorded)
    bank, bank_again = data.attributes["trial_split"] == 2, again.attributes["trial_split"] == 2
    assert bank.sum() == 20 * 24 and (data.x[bank] == again.x[bank_again]).all()
    assert again.camera["bank"] == data.camera["bank"]
    few = {**recorded["bank_screened"], "kept_walkers": [1, 2, 3], "kept": 3}
    with pytest.raises(ValueError, match="bank_screened.kept_walkers"):
        load_dataset("walkway", walkway(), stride=8, bank_screened=few)
    elsewhere = {**recorded["bank_screened"], "clip_sha256": "0" * 64}       # another camera's screen
    with pytest.raises(ValueError, match="bank_screened.clip_sha256"):
        load_dataset("walkway", walkway(), stride=8, bank_screened=elsewhere)
    with pytest.raises(ValueError, match="in place of bank_screen"):
        load_dataset("walkway", walkway(), **options, bank_screened=recorded["bank_screened"])


def test_a_screen_of_three_rounds_reloads_the_same_walkers_of_every_round(tmp_path, monkeypatch):
    from sensorveil.runtime.bundle import sha256_of
    from sensorveil.sdk.datasets import bank_screen, load_dataset
    from sensorveil.sdk.runs import recorded_options
    detector = tmp_path / "detector.onnx"
    detector.write_bytes(b"a detector's bytes")
    kept = list(range(5)) + list(range(70, 76)) + list(range(180, 186))          # walkers of all three rounds
    outcome = {"detector": detector.name, "candidates": 192, "rounds": 3, "kept": len(kept), "share": 0.85,
               "clip_sha256": sha256_of(Path(walkway()))}
    rounds = []

    def screen(clip, until, first, graph, seed, progress, hashes, more):
        rounds.extend([first[1], more(1)[1], more(2)[1]])
        return np.asarray(kept), dict(outcome)
    monkeypatch.setattr(bank_screen, "_SCREENED", {})
    monkeypatch.setattr(bank_screen, "_screen", screen)
    options = {"stride": 8, "bank_screen": str(detector)}
    data = load_dataset("walkway", walkway(), **options)
    assert all(r.min() == 0 and r.max() == 63 for r in rounds)                    # each round's own walker ids
    twice = load_dataset("walkway", walkway(), **options)        # the same screen again: remembered, not run
    assert len(rounds) == 3 and (twice.x[twice.attributes["trial_split"] == 2] ==
                                 data.x[data.attributes["trial_split"] == 2]).all()
    monkeypatch.setattr(bank_screen, "_screen", None)                             # a reload never screens
    again = load_dataset("walkway", walkway(), **recorded_options(options, data))
    bank, bank_again = data.attributes["trial_split"] == 2, again.attributes["trial_split"] == 2
    assert bank.sum() == len(kept) * 24 and (data.x[bank] == again.x[bank_again]).all()
    assert len(np.unique(data.attributes["track"][bank])) == 2 * len(kept)
    first_only = load_dataset("walkway", walkway(), stride=8,
                              bank_screened={**outcome, "candidates": 64, "kept": 17, "kept_walkers": list(range(17))})
    with pytest.raises(ValueError, match="bank_screened.kept_walkers"):              # 180 is not of 64 candidates
        load_dataset("walkway", walkway(), stride=8, bank_screened={**outcome, "candidates": 64,
                                                                     "kept_walkers": kept})
    with pytest.raises(ValueError, match="bank_screened.kept_walkers"):              # not a whole round
        load_dataset("walkway", walkway(), stride=8, bank_screened={**outcome, "candidates": 100,
                                                                     "kept_walkers": kept[:11]})
    rows = data.attributes["trial_split"] == 2
    assert (first_only.x[first_only.attributes["trial_split"] == 2][:5 * 24] == data.x[rows][:5 * 24]).all()


@pytest.mark.parametrize("value, field", [
    ({"source": "rendered", "real_people": True}, "bank_source.real_people"),   # a bank that lies about itself
    ({"source": "clip", "real_people": False}, "bank_source.real_people"),
    ({"source": "somewhere"}, "bank_source.source"),
    ("rendered", "bank_source"),
])
def test_a_bank_source_the_runtime_cannot_vouch_for_is_refused(value, field):
    from sensorveil.runtime.manifest_fields import ManifestError
    from sensorveil.runtime.stages.substitution import need_bank_source
    with pytest.raises(ManifestError, match=field):
        need_bank_source("bundle", "pipeline[1].bank_source", value)


def test_the_description_names_who_the_substitutes_are():
    from sensorveil.runtime.stages.substitution import describe_bank
    assert "no real person" in describe_bank({"source": "rendered", "real_people": False, "people": "48 walkers"})
    assert describe_bank({"source": "clip", "real_people": True}).startswith("WARNING substitutes: real bystanders")
    assert "not recorded" in describe_bank(None)


def person(crop=CROP_SHAPE, x=32, width=30, top=16, height=96):
    """A cut-out holding one upright figure: a head over a body, grey 120, 0 elsewhere."""
    cut_out = np.zeros(crop, np.uint8)
    cut_out[top:top + 14, x - 5:x + 5] = 120
    cut_out[top + 12:top + height, x - width // 2:x + width // 2] = 120
    return cut_out


def test_only_a_cut_out_of_one_person_is_person_shaped():
    from sensorveil.runtime.camera import person_shaped
    assert person_shaped(person()) and person_shaped(np.repeat(person()[..., None], 3, axis=2))
    pair = np.maximum(person(x=16), person(x=48))            # two walkers touching: one blob, nearly as wide as tall
    assert not person_shaped(pair)
    apart = np.maximum(person(x=12, width=10), person(x=50, width=10))
    assert not person_shaped(apart)                           # two blobs
    assert not person_shaped(person(top=70, height=40))       # a piece: a third of the crop tall
    lying = np.zeros(CROP_SHAPE, np.uint8)
    lying[50:80, 2:62] = 120                                  # wider than tall
    assert not person_shaped(lying)
    thin = np.zeros(CROP_SHAPE, np.uint8)
    thin[10:120, 31:33] = 120                                 # a pole: too little of the crop
    assert not person_shaped(thin) and not person_shaped(np.zeros(CROP_SHAPE, np.uint8))
    ring = person()
    ring[30:112, 18:46] = 0                                    # an outline: fills too little of its box
    assert not person_shaped(ring)


def test_every_rendered_walker_is_person_shaped():
    from sensorveil.runtime.camera import person_shaped
    from sensorveil.sdk.datasets.rendered_people import render_walkers
    drawn = render_walkers(12, 12, CROP_SHAPE, seed=0)
    assert all(person_shaped(c) for c in drawn["colour"])


def test_a_cut_out_that_is_not_person_shaped_is_never_in_the_bank():
    """A clip bank (the camera's own training crops) holds crops of two people walking together, whose mask is
    one wide blob: the pool leaves them out, so no bank drawn from it holds one; a bank given one anyway is
    refused at export rather than shipped."""
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.mechanisms.pass_parts.bundle import substitute_samples
    from sensorveil.sdk.mechanisms.pass_parts.data import bank_pool, person_shaped_rows, prepare_data, split_rows
    data = load_dataset("walkway", walkway(), stride=8, bank="clip")
    train, _ = split_rows(data, "direction", "appearance", 0)
    shaped = person_shaped_rows(data, train)
    assert 0 < (~shaped).sum() < 0.3 * len(train)           # some pairs and pieces; most crops one person
    pool = bank_pool(data, train)
    assert set(pool) == set(train[shaped])
    pdata = prepare_data(data, "direction", "appearance", substitutes=len(train))
    assert len(pdata.bank_rows) == len(pool) and person_shaped_rows(data, pdata.bank_rows).all()
    assert len(substitute_samples(data, pdata.bank_rows)) == len(pool)
    with pytest.raises(ValueError, match="1 of the bank's .* cut-outs are not person-shaped"):
        substitute_samples(data, np.sort(np.append(pool[:20], train[~shaped][0])))
