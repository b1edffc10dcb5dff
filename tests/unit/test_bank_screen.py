"""The bank screen (sdk.datasets.bank_screen): a walker is kept by how often a detector finds it pasted, and the
walkway loader takes a screen only for a rendered bank and an existing detector file."""
import numpy as np
import pytest

from sensorveil.sdk.datasets import bank_screen
from sensorveil.sdk.datasets.walkway import _check_options


def test_each_walker_is_scored_by_the_places_where_the_detector_finds_it_pasted():
    frame = np.full((120, 160, 3), 90, np.uint8)
    boxes = np.array([[20, 20, 20, 60], [100, 30, 20, 60]])
    colour = np.zeros((4, 128, 64, 3), np.uint8)
    colour[:, 20:110, 20:44] = 1
    colour[:2, 20:110, 20:44, 2] = 250          # walker 0 wears red (BGR), walker 1 blue
    colour[2:, 20:110, 20:44, 0] = 250
    walker_of = np.array([0, 0, 1, 1])

    def find(pasted):                           # a detector that sees red people only
        red = (pasted[..., 2] > 200) & (pasted[..., 0] < 50)
        return [b for b in boxes if red[b[1]:b[1] + b[3], b[0]:b[0] + b[2]].any()]

    shares = bank_screen.found_shares([(frame, frame.copy(), boxes)] * 3, colour, walker_of, find)
    assert shares.tolist() == [1.0, 0.0]


def test_a_pasted_box_is_found_by_overlap_or_by_a_box_of_its_height_around_it():
    pasted = np.array([[10, 10, 20, 60], [100, 10, 20, 60]])
    assert bank_screen.matched(pasted, [[11, 12, 20, 58]]).tolist() == [True, False]
    assert bank_screen.matched(pasted, [[100, 10, 20, 10]]).tolist() == [False, False]      # a head, not them


def test_the_screen_goes_with_a_rendered_bank_and_an_existing_detector(tmp_path):
    clip, graph = tmp_path / "clip.avi", tmp_path / "detector.onnx"
    clip.write_bytes(b"x")
    with pytest.raises(ValueError, match="bank_screen"):
        _check_options(str(clip), 0.6, "rendered", None, str(graph))          # no such file
    graph.write_bytes(b"x")
    with pytest.raises(ValueError, match="bank_screen"):
        _check_options(str(clip), 0.6, "clip", None, str(graph))              # a clip bank is not screened
    _check_options(str(clip), 0.6, "rendered", None, str(graph))


def test_a_screen_is_reused_for_the_same_bytes_and_run_again_when_the_detector_changes(tmp_path, monkeypatch):
    clip, graph = tmp_path / "clip.avi", tmp_path / "detector.onnx"
    clip.write_bytes(b"clip")
    graph.write_bytes(b"graph one")
    runs = []

    def screen(*args):
        runs.append(args[4])
        return np.arange(3), {"kept": 3}
    monkeypatch.setattr(bank_screen, "_screen", screen)
    monkeypatch.setattr(bank_screen, "_SCREENED", {})
    colour, walker_of = np.zeros((2, 4, 4, 3), np.uint8), np.array([0, 1])
    kept, _ = bank_screen.screen_walkers(clip, 10, colour, walker_of, graph)
    kept[:] = 9                                        # a caller's copy: the memo keeps its own
    again, _ = bank_screen.screen_walkers(clip, 10, colour, walker_of, graph)
    assert len(runs) == 1 and again.tolist() == [0, 1, 2]
    graph.write_bytes(b"graph two")
    bank_screen.screen_walkers(clip, 10, colour, walker_of, graph)
    bank_screen.screen_walkers(clip, 10, colour, walker_of, graph, seed=1)
    assert len(runs) == 3


def test_too_few_walkers_kept_is_one_error_saying_how_many_people_the_detector_finds_and_what_else_to_do(
        tmp_path, monkeypatch):
    frame = np.zeros((8, 8, 3), np.uint8)
    places = [(frame, frame, np.zeros((2, 4), int))] * 5          # the detector finds 2 people a frame
    monkeypatch.setattr(bank_screen, "graph_finder", lambda graph: None)
    monkeypatch.setattr(bank_screen, "training_places", lambda clip, until, find: places)
    monkeypatch.setattr(bank_screen, "found_shares", lambda *args, **kw: np.r_[np.ones(4), np.zeros(60)])
    first = (None, np.arange(64))
    with pytest.raises(ValueError, match=r"4 of 64 .* 2\.0 people a frame .*--person-detector motion"):
        bank_screen._screen(tmp_path / "clip.avi", 10, first, tmp_path / "d.onnx", 0, None, ("c", "d"))
    more = lambda r: (None, np.arange(64))                               # noqa: E731
    with pytest.raises(ValueError, match=r"12 of 192 .*"):           # three rounds, still too few
        bank_screen._screen(tmp_path / "clip.avi", 10, first, tmp_path / "d.onnx", 0, None, ("c", "d"), more)


def test_where_few_walkers_pass_the_screen_draws_further_rounds_at_the_same_share(tmp_path, monkeypatch):
    frame = np.zeros((8, 8, 3), np.uint8)
    monkeypatch.setattr(bank_screen, "graph_finder", lambda graph: None)
    monkeypatch.setattr(bank_screen, "training_places", lambda clip, until, find: [(frame, frame, np.zeros((1, 4)))])
    rounds_drawn, shares = [], {0: np.r_[np.ones(10), np.zeros(54)], 1: np.r_[np.zeros(60), np.full(4, 0.9)],
                                2: np.r_[np.full(3, 0.84), np.ones(5), np.zeros(56)]}
    monkeypatch.setattr(bank_screen, "found_shares", lambda *args, draw_round: shares[draw_round])

    def more(r):
        rounds_drawn.append(r)
        return None, np.arange(64)
    kept, record = bank_screen._screen(tmp_path / "c.avi", 10, (None, np.arange(64)), tmp_path / "d.onnx", 0, None,
                                       ("c", "d"), more)
    assert rounds_drawn == [1, 2]
    assert kept.tolist() == list(range(10)) + [124, 125, 126, 127] + list(range(131, 136))   # 0.84 < 85%: out
    assert (record["candidates"], record["rounds"], record["kept"]) == (192, 3, 19)
    enough = {0: np.r_[np.ones(16), np.zeros(48)]}
    monkeypatch.setattr(bank_screen, "found_shares", lambda *args, draw_round: enough[draw_round])
    _, record = bank_screen._screen(tmp_path / "c.avi", 10, (None, np.arange(64)), tmp_path / "d.onnx", 0, None,
                                    ("c", "d"), more)
    assert record["rounds"] == 1 and rounds_drawn == [1, 2]          # a first round that suffices draws no more
