"""The identity audit (sensorveil.sdk.reid_audit): re-identification figures as the field computes them, a verdict
only with power, and a bank search that finds a bank cut from the clip and not the rendered walkers."""
import json

import numpy as np
import pytest

from sensorveil.sdk import reid_audit, reid_figures
from tests.integration.test_camera import walkway


def test_rank1_and_average_precision_as_market1501_computes_them():
    gallery_ids = np.array([1, 2, 1, 3])
    similarity = np.array([[0.9, 0.8, 0.1, 0.0],     # person 1: right first; its second crop ranked 3rd
                           [0.9, 0.8, 0.1, 0.0]])    # person 2: wrong first, right second
    hit, ap = reid_figures.ranking_scores(similarity, np.array([1, 2]), gallery_ids)
    assert hit.tolist() == [True, False]
    np.testing.assert_allclose(ap, [(1 / 1 + 2 / 3) / 2, 1 / 2])


def test_chance_is_a_random_ranking_of_the_same_gallery():
    ids = np.repeat(np.arange(10), 4)
    chance = reid_figures.chance_scores(ids, ids, seed=0, draws=50)
    assert chance["people"] == 10 and abs(chance["rank1"] - 0.1) < 0.02


def test_each_person_weighs_once_so_chance_is_one_in_n_however_long_their_tracks():
    # person 0 has 9 gallery crops and 9 queries, person 1 one of each: per query, chance would be 0.82
    gallery_ids = query_ids = np.array([0] * 9 + [1])
    chance = reid_figures.chance_scores(query_ids, gallery_ids, seed=0)
    assert chance["rank1"] == pytest.approx(0.5) and chance["people"] == 2
    similarity = np.tile(np.array([1.0] * 9 + [0.0]), (10, 1))     # everyone ranked as person 0
    figures = reid_figures.figures_from_similarity(similarity, query_ids, gallery_ids, seed=0)
    assert figures["rank1"]["mean"] == pytest.approx(0.5) and figures["per_person"]["rank1"] == [1.0, 0.0]
    assert figures["queries"] == 10 and figures["people"] == 2


def test_folds_pool_every_test_person_once_and_weigh_chance_by_people():
    split = np.array([0, 0, 1, 1, 2])
    first, second = reid_audit.folds(split)
    assert first.tolist() == [0, 0, 1, 1, 2] and second.tolist() == [1, 1, 0, 0, 2]    # a bank stays out
    fold = {"per_person": {"rank1": [1.0, 0.0], "mAP": [1.0, 0.5]}, "queries": 4, "people": 2}
    other = {"per_person": {"rank1": [0.0, 0.0, 0.0, 1.0], "mAP": [0.2, 0.2, 0.2, 1.0]}, "queries": 8, "people": 4}
    pooled = reid_figures.pool_figures([fold, other], seed=0)
    assert pooled["people"] == 6 and pooled["queries"] == 12 and pooled["rank1"]["mean"] == pytest.approx(2 / 6)
    chance = reid_figures.pool_chance([{"rank1": 0.5, "mAP": 0.6, "people": 2},
                                       {"rank1": 0.25, "mAP": 0.3, "people": 4}])
    assert chance["rank1"] == pytest.approx(2 / 6) and chance["people"] == 6      # 1/N of each fold, by people


def test_colour_crops_are_cut_out_and_reach_the_network_as_three_channels():
    colour = np.full((2, 4, 3, 3), 200, np.uint8)
    masks = np.zeros((2, 4, 3), bool)
    masks[:, 1:3, 1] = True
    cut = reid_audit.cut_out(colour, masks)
    assert cut.shape == (2, 4, 3, 3) and cut[:, 1:3, 1].min() == 200 and cut[:, 0].max() == 0
    assert reid_audit.channels_first(cut).shape == (2, 3, 4, 3)
    assert reid_audit.channels_first(cut[..., 0]).shape == (2, 1, 4, 3)


def test_a_clip_whose_people_all_stay_in_both_parts_is_one_clear_error():
    from types import SimpleNamespace
    track = np.array([0, 0, 1, 1])
    everyone_stays = SimpleNamespace(attributes={"track": track, "trial_split": np.array([0, 1, 0, 1])})
    with pytest.raises(ValueError, match="no test tracks"):
        reid_audit.identity_audit(everyone_stays, release=None)


def test_test_people_are_disjoint_from_training_people_and_alternate_gallery_and_query():
    track = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 3])
    split = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1])
    train, gallery, query = reid_audit.identity_split(track, split)
    assert set(track[train]) == {0, 1}
    assert set(track[gallery]) == set(track[query]) == {2}       # 1 straddles the cut; 3 has one crop
    assert gallery.tolist() == [5, 7] and query.tolist() == [6, 8]


def figures(mean, low, high):
    return {"mean": mean, "low": low, "high": high}


@pytest.mark.parametrize("raw, released, bank, expected", [
    (figures(0.30, 0.25, 0.35), figures(0.10, 0.08, 0.12), None, "no power"),        # raw below 40%
    (figures(0.36, 0.32, 0.40), figures(0.30, 0.25, 0.35), None, "leaks"),           # raw below 40%, yet the
    #   release is re-identified above 2x chance across its interval: power enough for a leak (the crowd's PR-GAN)
    (figures(0.60, 0.50, 0.70), figures(0.10, 0.00, 0.20), None, "no verdict"),      # +-10 points
    (figures(0.60, 0.50, 0.70), figures(0.15, 0.12, 0.18), None, "protects"),
    (figures(0.60, 0.50, 0.70), figures(0.30, 0.27, 0.33), None, "leaks"),
    (figures(0.48, 0.41, 0.60), figures(0.42, 0.29, 0.53), None, "leaks"),           # +-12 points, all above 2x
    (figures(0.60, 0.50, 0.70), figures(0.10, 0.08, 0.12),
     {"found": figures(0.80, 0.70, 0.90), "false_match_rate": 0.05}, "leaks"),     # bystanders in the bank
])
def test_a_verdict_holds_only_when_every_part_of_the_goal_holds(raw, released, bank, expected):
    chance = {"rank1": 0.1, "mAP": 0.1, "people": 10}
    assert reid_audit.verdict({"rank1": raw}, {"rank1": released}, chance, bank)[0] == expected


def test_no_verdict_names_what_its_test_identities_are():
    chance = {"rank1": 0.1, "mAP": 0.1, "people": 10}
    raw, released = figures(0.60, 0.50, 0.70), figures(0.10, 0.00, 0.20)
    assert "too few test tracks" in reid_audit.verdict({"rank1": raw}, {"rank1": released}, chance)[1]
    kind = "people of the ground truth"
    assert f"too few test {kind}" in reid_audit.verdict({"rank1": raw}, {"rank1": released}, chance,
                                                        identities=kind)[1]


def test_multi_shot_pools_each_persons_crops_into_one_query():
    # one person's single crops are each closer to the wrong person; their mean is nearest their own
    gallery = np.array([[1.0, 0.0], [0.0, 1.0]])
    queries = np.array([[0.6, 0.8], [0.6, 0.8], [1.0, 0.0], [0.0, 1.0]])
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    ids = np.array([0, 0, 0, 1])
    single = reid_figures.ranking_scores(queries @ gallery.T, ids, np.array([0, 1]))[0]
    assert single.tolist() == [False, False, True, True]
    people, pool = reid_figures.pooled(queries, ids)
    assert people.tolist() == [0, 1] and np.allclose(np.linalg.norm(pool, axis=1), 1)
    shots = reid_figures.multi_shot(gallery, np.array([0, 1]), queries, queries, ids, seed=0)
    assert shots["released"]["queries"] == 2 and shots["released"]["rank1"]["mean"] == 1.0
    assert shots["chance"]["people"] == 2


def test_pooled_release_above_chance_across_its_interval_is_a_leak_single_shots_hide():
    chance = {"rank1": 0.1, "mAP": 0.1, "people": 10}
    raw, released = figures(0.60, 0.50, 0.70), figures(0.15, 0.12, 0.18)     # single shots: protects
    pooled = {"raw": {"rank1": figures(0.9, 0.7, 1.0)}, "chance": {"rank1": 0.1},
              "released": {"rank1": figures(0.6, 0.4, 0.8)}}
    assert reid_audit.verdict({"rank1": raw}, {"rank1": released}, chance, None, pooled)[0] == "leaks"
    pooled["released"]["rank1"] = figures(0.3, 0.1, 0.5)                      # interval reaches 2x chance
    assert reid_audit.verdict({"rank1": raw}, {"rank1": released}, chance, None, pooled)[0] == "protects"


@pytest.mark.exports
@pytest.mark.trains
def test_the_audit_of_a_rendered_bank_bundle_finds_no_camera_person_where_a_clip_bank_would_be_found(tmp_path,
                                                                                                   monkeypatch,
                                                                                                   capsys):
    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    run = train_run("pass", "walkway", data_path=walkway(), out=tmp_path / "run", epochs=1, attacker_epochs=1,
                    dataset_options={"stride": 4},
                    settings={"embedding_dim": 32, "progress": False, "condition": "direction"})
    bundle = export_run(run, "onnx", tmp_path / "bundle", person_detector="motion")
    result = reid_audit.audit_bundle(bundle, epochs=8, seed=0)
    assert result["test_people"] >= 10 and result["raw"]["queries"] >= 100
    # two folds, each part of the clip once the attacker's: their test people pooled, every one once
    assert len(result["folds"]) == 2 and sum(f["test_people"] for f in result["folds"]) == result["test_people"]
    assert all(f["test_people"] > 0 for f in result["folds"]) and len(result["training_people"]) == 2
    assert result["crops"] == "colour"          # walkway films in colour and the walkers are pasted in colour
    assert result["verdict"] in ("protects", "leaks", "no power", "no verdict")
    assert result["raw"]["rank1"]["mean"] > 2 * result["chance"]["rank1"]          # the attacker sees people
    assert result["bank"]["found"]["mean"] <= 0.15                                 # rendered walkers: strangers
    assert "rank1_of_clip_people" not in result["bank"]
    # power of the bank search: the clip's own training people, released as they are, are found
    from sensorveil.sdk.datasets import load_dataset
    data = load_dataset("walkway", walkway(), stride=4)
    train, gallery, query = reid_audit.identity_split(data.attributes["track"], data.attributes["trial_split"])
    features = reid_audit.train_attacker(reid_audit.cut_out(data.x[train], data.foreground[train]),
                                         data.attributes["track"][train], 8, 0)
    shown = train[::3]
    clip_bank = reid_audit.bank_search(features, data, train, reid_audit.cut_out(data.x[shown], data.foreground[shown]),
                                       shown, query, seed=0)
    assert clip_bank["found"]["mean"] >= 0.5 and clip_bank["rank1_of_clip_people"]["rank1"]["mean"] >= 0.3
    # one seed, one draw: the identity audit loads the runtime with its seed, so a page regenerates to its figures
    # (this 1-epoch bundle draws 2 walkers, so comparing two releases could not fail: the loads are checked)
    from sensorveil.runtime import Privatizer
    loaded_with, load_privatizer = [], Privatizer.load
    monkeypatch.setattr(Privatizer, "load", staticmethod(
        lambda *a, **k: loaded_with.append(k.get("seed")) or load_privatizer(*a, **k)))
    reid_audit.released_crops(bundle, "auto", data, query, data.attributes["direction"][query], draw_seed=3)
    assert result["draw_seed"] == 0 and loaded_with and set(loaded_with) == {3}
    monkeypatch.undo()
    assert "identity: re-identification" in reid_audit.format_identity(result)
    shots = result["multi_shot"]        # one pooled query per test person
    assert shots["released"]["queries"] == shots["raw"]["queries"] == result["test_people"]
    assert shots["raw"]["rank1"]["mean"] > 2 * shots["chance"]["rank1"]           # pooled raw: power
    assert "multi-shot" in reid_audit.format_identity(result)
    # the verb a user runs on their own bundle and clip: the goal part by part, nothing retrained
    from sensorveil.cli import main
    assert main(["camera-audit", str(bundle), "--clip", walkway(), "--frames", "100", "--no-identity",
                 "--json", str(tmp_path / "goal.json")]) == 0
    written = json.loads((tmp_path / "goal.json").read_text())
    assert set(written["goal"]["parts"]) == {"identity", "leak_meter", "recall", "count"}
    assert written["clip"]["frames"] == 100 and written["clip"]["leak_meter"]["measured_boxes"] > 0
    # beside the goal, the direction the device's draws walk: this bundle is conditioned on it
    direction = written["clip"]["direction"]
    assert direction["conditioned_on"] == "direction" and direction["boxes"] > 0 and direction["people"] > 0
    # a motion-only bundle is counted by its own stack and KNN, both in the goal (no motion counter beside it)
    assert {name: c["in_goal"] for name, c in written["clip"]["count"].items()} == {"pipeline": True,
                                                                                   "independent": True}
    assert written["clip"]["draw_seed"] == 0                # --seed's default draws the clip's substitutes too
    # and the clip audit's stream is loaded with it (a 1-epoch bundle's release differs by no seed to look at)
    from sensorveil.runtime import stream
    seeds, load = [], stream.load_for_stream
    monkeypatch.setattr(stream, "load_for_stream", lambda *a, **k: seeds.append(k.get("seed")) or load(*a, **k))
    assert main(["camera-audit", str(bundle), "--clip", walkway(), "--frames", "20", "--no-identity",
                 "--seed", "7"]) == 0 and seeds == [7]
    # released on the operator's picture of the empty place, as `sensorveil run --scene-still` releases
    import cv2
    cv2.imwrite(str(tmp_path / "still.png"), np.full((360, 480, 3), 90, np.uint8))
    assert main(["camera-audit", str(bundle), "--clip", walkway(), "--frames", "40", "--no-identity",
                 "--scene-still", str(tmp_path / "still.png"), "--json", str(tmp_path / "still.json")]) == 0
    assert json.loads((tmp_path / "still.json").read_text())["clip"]["scene_still"] is True
    check_ground_truth(bundle, tmp_path, capsys)


def check_ground_truth(bundle, folder, capsys):
    """--ground-truth: the counts are scored against the gt.txt's people (three on every frame here, in 768x576
    pixels), and a file that is not one is one error before any audit runs."""
    from sensorveil.cli import main
    gt = folder / "gt.txt"
    gt.write_text("".join(f"{frame},{person},{100 + 200 * person},200,40,120,1,-1,-1,-1\n"
                          for frame in range(1, 41) for person in range(3)))
    capsys.readouterr()
    assert main(["camera-audit", str(bundle), "--clip", walkway(), "--frames", "40", "--no-identity",
                 "--ground-truth", str(gt), "--gt-size", "768x576", "--json", str(folder / "gt.json")]) == 0
    clip = json.loads((folder / "gt.json").read_text())["clip"]
    counted = clip["count"]["pipeline"]
    assert clip["count_reference"] == "ground truth" and counted["reference_frames"] > 0
    assert counted["reference_people"] == 3 * counted["reference_frames"]
    assert "(ground truth: " in capsys.readouterr().out
    gt.write_text("frame,id,left,top\n")
    assert main(["camera-audit", str(bundle), "--clip", walkway(), "--no-identity", "--ground-truth", str(gt)]) == 2
    assert "expected numeric rows frame,id,left,top,width,height" in capsys.readouterr().err


@pytest.mark.parametrize("attributes, identity, expected", [
    ("protects", "protects", "goal met"), ("protects", "no verdict", "no verdict"),
    ("leaks", "protects", "goal not met"), ("protects", "leaks", "goal not met"),
])
def test_the_camera_quickstart_is_met_only_when_every_audit_holds(attributes, identity, expected):
    from sensorveil.quickstart import camera_summary
    from tests.integration.test_camera_goal import clip_figures
    interval = {"mean": 0.3, "low": 0.2, "high": 0.4}
    audit = {"strongest_attacker": "trees", "private": {"trees": interval}, "random_star": 0.3, "useful": interval,
             "goal": {"strongest_within_5_points_of_random_star": True}, "verdict": attributes,
             "power": {"raw_strongest_accuracy": 0.5}}
    summary = camera_summary(1.0, "b", "r", audit, {"verdict": identity, "why": "-"},
                             {"video": "v", "contact_sheet": "c"}, clip_figures())
    assert summary["verdict"] == expected
    assert set(summary["goal"]["parts"]) == {"identity", "attributes", "leak_meter", "recall", "count"}


def test_the_camera_quickstart_prints_the_direction_the_device_delivers_beside_the_read_back_one(capsys,
                                                                                                 monkeypatch):
    from sensorveil.quickstart import camera_summary, print_camera_summary
    monkeypatch.setattr(reid_audit, "format_identity", lambda result: "identity: (its own test above)")
    from tests.integration.test_camera_goal import clip_figures
    interval = {"mean": 0.99, "low": 0.98, "high": 1.0}
    audit = {"strongest_attacker": "trees", "private": {"trees": interval}, "random_star": 0.3, "useful": interval,
             "goal": {"strongest_within_5_points_of_random_star": True}, "verdict": "protects",
             "power": {"raw_strongest_accuracy": 0.5}}
    identity = {"verdict": "no verdict", "why": "-"}
    clip = dict(clip_figures(), direction={"conditioned_on": "direction", "boxes": 100, "people": 9,
                                           "drawn_on_walked": 0.82, "interval": [0.79, 0.85], "drawn_unknown": 0.07})
    summary = camera_summary(1.0, "b", "r", audit, identity, {"video": "v", "contact_sheet": "c"}, clip)
    summary["substitutes"] = "walkers"
    print_camera_summary(summary)
    out = capsys.readouterr().out
    assert "(read back: each row drawn on its label)" in out
    assert "on the device, 82.0% [79.0%, 85.0%] of 100 boxes of 9 walking people" in out
