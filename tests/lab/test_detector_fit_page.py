"""The detector-fit page: one table per clip, every candidate the export tried, the kept one marked, and a clip
where no setting meets the target said so."""
import pytest

from tests.conftest import load_script


def fields(reached: bool) -> dict:
    candidates = [{"tile_rows": rows, "score": score, "recall": recall, "extra_boxes_per_person": extra,
                   "graph_runs_per_frame": 2 if rows == 1 else 8}
                  for rows, score, recall, extra in ((1, 0.3, 0.5, 0.01), (1, 0.05, 0.8, 0.4),
                                                     (2, 0.3, 0.91, 0.02), (2, 0.05, 0.95, 0.7))]
    kept = (0.3, 2) if reached else (0.05, 2)
    return {"detector_score": kept[0], "detector_tile_rows": kept[1],
            "detector_fit": {"chosen": "fitted", "target_reached": reached, "recall_target": 0.9,
                             "extra_boxes_limit": 0.25, "judged_frames": 45, "reference_people": 219,
                             "frames": "the first 60% of walkway.avi", "candidates": candidates}}


def test_each_clip_gets_a_table_of_every_candidate_with_the_kept_one_marked():
    page = load_script("detector_fit")
    lines = page.clip_section("walkway", "PETS 2009", "480x360, 795 frames", fields(True))
    table = [line for line in lines if line.startswith("| 0.")]
    assert len(table) == 2 and table[0].startswith("| 0.3 |")          # thresholds high to low
    assert "**91.0%, 0.02 (kept)**" in table[0] and "kept" not in table[1]
    assert any("meets the target (90% of the reference people" in line for line in lines)


def test_a_clip_where_no_setting_meets_the_target_says_so():
    page = load_script("detector_fit")
    lines = page.clip_section("tram stop", "fetched", "640x480, 379 frames", fields(False))
    assert any("**no setting meets**" in line and "finding the most people is kept" in line for line in lines)
    unfitted = {"detector_fit": {"chosen": "first setting", "why": "the clip was not here"}}
    assert "Not fitted: the clip was not here." in page.clip_section("x", "y", "z", unfitted)


def test_each_clip_needs_its_name_and_source():
    page = load_script("detector_fit")
    with pytest.raises(SystemExit):
        page.main(["--clip", "a.avi", "--clip", "b.avi", "--name", "a", "--source", "s", "--out", "o.md"])


def test_ground_truth_boxes_are_scaled_to_the_clip_and_people_outside_it_left_out(tmp_path):
    from sensorveil_lab.detector_truth import truth_boxes
    gt = tmp_path / "gt.txt"
    gt.write_text("1,1,100,200,40,80,1,-1,-1,-1\n1,2,760,10,40,80,1,-1,-1,-1\n2,1,110,200,40,80,1,-1,-1,-1\n")
    boxes = truth_boxes(gt, (768, 576), (480, 360))
    assert boxes[0].tolist() == [[62, 125, 25, 50]]          # the second person's centre is past the right edge
    assert boxes[1].tolist() == [[69, 125, 25, 50]]


def test_a_truth_cell_names_the_annotated_share_of_that_setting():
    page = load_script("detector_fit")
    truth = {"candidates": [{"tile_rows": 2, "score": 0.3, "recall": 0.873}]}
    assert page.truth_cell(truth, 0.3, 2) == "; 87.3% of annotated" and page.truth_cell(None, 0.3, 2) == ""
