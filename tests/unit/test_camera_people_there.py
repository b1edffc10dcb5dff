"""camera_goal.format_people_there: beside the goal, each counter's count of raw and release against the people
there are, and which is nearer only where the intervals part."""
from sensorveil.benchmarks.camera_goal import format_people_there


def count(raw_error, released_error, width=0.1):
    out = {"reference_frames": 77, "reference_people": 405}
    for video, error in (("raw", raw_error), ("floor", raw_error), ("released", released_error)):
        out[f"{video}_same_as_reference"] = 0.4
        out[f"{video}_error_vs_reference"] = error
        out[f"{video}_error_vs_reference_interval"] = [error - width, error + width]
    return out


def test_each_counter_gets_a_line_that_fits_a_terminal_and_says_which_is_nearer():
    clip = {"count_reference": "ground truth",
            "count": {"pipeline": count(0.94, 0.87), "independent": count(1.4, 0.6), "motion": count(0.5, 1.2)}}
    text = format_people_there(clip)
    lines = text.splitlines()
    assert lines[0].startswith("count against the people there are, beside the goal")
    assert lines[1] == "  (ground truth: 405 people on 77 frames)"
    assert "raw 0.94 [0.84, 1.04], release 0.87 [0.77, 0.97]" in lines[2] and lines[2].endswith("(as near)")
    assert lines[3].endswith("(release nearer)") and lines[4].endswith("(release further)")
    assert all(len(line) <= 100 for line in lines), [len(line) for line in lines]


def test_without_scored_frames_it_says_not_measured():
    assert "not measured" in format_people_there({"count": {"pipeline": {"same_count": 0.5}}})
