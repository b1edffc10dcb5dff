"""The leak meter of the camera results: it calls a missed person leaking when the release
shows them, and not when the release shows the empty scene, a neutral one or the pipeline's quiet scene."""
import numpy as np

from sensorveil.benchmarks.leak_meter import LeakMeter, empty_scene
from sensorveil.runtime.camera.scene import neutral_scene


def walking_clip(frames=60):
    rng = np.random.default_rng(0)
    clip = []
    for k in range(frames):
        frame = np.clip(120 + rng.normal(0, 2, (120, 160, 3)), 0, 255).astype(np.uint8)
        x = 10 + 2 * k
        frame[50:86, x:x + 12] = 30
        frame[50:86:4, x:x + 12] = 70      # stripes: a person has a pattern of their own, not one flat colour
        clip.append(frame)
    return clip


def meter_over(clip, release, pipeline_boxes=lambda k: np.zeros((0, 4), np.int64)):
    meter = LeakMeter(empty_scene(clip))
    for k, raw in enumerate(clip):
        meter.add(k, raw, release(k, raw), pipeline_boxes(k))
    return meter.figures()


def test_a_missed_person_released_as_the_camera_saw_them_leaks_in_every_frame():
    clip = walking_clip()
    figures = meter_over(clip, lambda k, raw: raw)
    assert figures["offline_boxes"] == len(clip) and figures["leaking_boxes"] == len(clip)
    assert figures["worst_frame"]["leaking"] == 1


def test_the_empty_scene_or_a_neutral_one_does_not_leak_a_ghost_does():
    clip = walking_clip()
    empty = np.clip(120 + np.zeros((120, 160, 3)), 0, 255).astype(np.uint8)
    assert meter_over(clip, lambda k, raw: empty)["leaking_boxes"] == 0
    assert meter_over(clip, lambda k, raw: np.full_like(raw, 128))["leaking_boxes"] == 0
    assert meter_over(clip, lambda k, raw: neutral_scene(raw.shape))["leaking_boxes"] == 0     # the runtime's grain
    ghost = lambda k, raw: (0.3 * raw + 0.7 * empty).astype(np.uint8)     # noqa: E731  a faint ghost still shows
    assert meter_over(clip, ghost)["leaking_boxes"] == len(clip)          # the person's silhouette: a leak
    strong = lambda k, raw: (0.7 * raw + 0.3 * empty).astype(np.uint8)    # noqa: E731
    assert meter_over(clip, strong)["leaking_boxes"] == len(clip)


def test_a_scene_unlike_the_clip_s_median_is_not_the_person_a_ghost_on_it_is():
    """The quiet scene is darker than the median and neutral grey in blocks (walkway frame 660 tied the old
    correlation rule that way): it keeps none of the person; a ghost of 0.15 on that scene is caught."""
    clip = walking_clip()
    blocks = np.kron(np.indices((8, 10)).sum(0) % 2, np.ones((16, 16), np.uint8)).astype(bool)[:120, :, None]
    scene = np.where(blocks, 128, 0.8 * np.median(clip, axis=0) + 10)
    figures = meter_over(clip, lambda k, raw: scene.astype(np.uint8))
    assert figures["measured_boxes"] == len(clip) and figures["leaking_boxes"] == 0
    assert figures["largest_share"] < 0.05
    assert figures["control_caught_boxes"] == len(clip)        # the meter had the power to see a ghost there
    faint = lambda k, raw: (0.15 * raw + 0.85 * scene).astype(np.uint8)  # noqa: E731
    assert meter_over(clip, faint)["leaking_boxes"] == len(clip)


def test_a_person_of_one_flat_colour_is_judged_by_their_outline():
    clip = walking_clip()
    for frame in clip:
        frame[frame[..., 0] == 70] = 30
    figures = meter_over(clip, lambda k, raw: raw)
    assert figures["measured_boxes"] == len(clip) and figures["leaking_boxes"] == len(clip)
    empty = np.median(clip, axis=0).astype(np.uint8)
    assert meter_over(clip, lambda k, raw: empty)["leaking_boxes"] == 0


def test_people_the_pipeline_privatized_are_left_to_the_audit():
    clip = walking_clip()
    covered = lambda k: np.array([[10 + 2 * k, 50, 12, 36]])             # noqa: E731
    figures = meter_over(clip, lambda k, raw: raw, covered)
    assert figures["not_privatized_boxes"] == 0 and figures["leaking_boxes"] == 0


def test_pixels_the_pipeline_pasted_on_are_not_judged_as_the_camera_s():
    """A substitute pasted over a missed person's place is the mechanism's output, not a leak."""
    clip = walking_clip()
    meter = LeakMeter(empty_scene(clip))
    for k, raw in enumerate(clip):
        window = np.array([[10 + 2 * k - 2, 48, 10 + 2 * k + 14, 88]])     # x0, y0, x1, y1 over the person
        meter.add(k, raw, raw, np.zeros((0, 4), np.int64), window)        # its box was not the pipeline's
    figures = meter.figures()
    assert figures["not_privatized_boxes"] == len(clip) and figures["measured_boxes"] == 0
    assert figures["leaking_boxes"] == 0


def test_tiled_people_map_each_tile_s_boxes_back_into_the_frame():
    from sensorveil.benchmarks.leak_meter import TiledPeople
    seen = []

    def graph(name, batch):                       # a person in the middle of every tile
        seen.append(batch.shape)
        return np.array([[[0.25, 0.25, 0.75, 0.75, 0.9, 1]]], np.float32)
    boxes = TiledPeople(graph, grids=(2,), overlap=0.5)(0, np.zeros((120, 160, 3), np.uint8))
    assert seen == [(1, 300, 300, 3)] * 4
    # tiles of 80x106 at (0|54, 0|40): the middle halves; no box lies half inside another, so all four stay
    assert sorted(boxes[:, 0].tolist()) == [26, 26, 80, 80] and sorted(boxes[:, 1].tolist()) == [20, 20, 60, 60]


def test_tiled_people_look_at_the_whole_frame_too_so_a_person_taller_than_a_tile_is_found_whole():
    from sensorveil.benchmarks.leak_meter import TiledPeople

    def graph(name, batch):                       # one person filling the middle half of whatever it is shown
        return np.array([[[0.25, 0.25, 0.75, 0.75, 0.9, 1]]], np.float32)
    boxes = TiledPeople(graph, grids=(1, 2), overlap=0.5)(0, np.zeros((120, 160, 3), np.uint8))
    # the frame's own box (40, 30, 80, 60) first; the tiles' smaller boxes lie half inside it and are merged away
    assert boxes.tolist()[0] == [40, 30, 80, 60] and len(boxes) < 5


def test_the_empty_scene_leaves_a_standing_person_out_even_where_the_detector_misses_them_now_and_then():
    """A person stands at one place in 90% of the frames and the detector misses them in every third sampled
    frame: those misses alone would outnumber the empty frames, and the median would keep the person."""
    from sensorveil.benchmarks.reference_people import MEDIAN_EVERY, empty_scene
    frames = [np.full((40, 60), 200, np.uint8) for _ in range(120)]
    for frame in frames[12:]:
        frame[10:30, 20:30] = 50
    box = np.array([[20, 10, 10, 20]])

    def people(index, frame):
        missed = (index // MEDIAN_EVERY) % 3 == 0 or index < 12
        return box[:0] if missed else box
    scene = empty_scene(frames, people)
    assert abs(float(scene[20, 25]) - 200) < 1, scene[20, 25]


def test_recall_counts_reference_people_a_detector_overlaps():
    from sensorveil.benchmarks.detector_recall import found, wilson
    reference = np.array([[0, 0, 10, 20], [50, 0, 10, 20]])
    assert found(reference, np.array([[1, 1, 10, 20]])) == 1 and found(reference, np.zeros((0, 4))) == 0
    low, high = wilson(90, 100)
    assert low < 0.9 < high and 0.82 < low < 0.84


def striped_place_clip(frames=40, arrive=20, shade_until=10):
    """An empty place; until ``shade_until`` a faint striped shade lies on it (a passing light: far under
    PERSON_DIFF, so nobody is there), and from frame ``arrive`` a person with stripes in the same rows stands on
    it. A release that kept the shaded place reads as the person: the meter's false reading, on purpose."""
    rng = np.random.default_rng(1)
    place = np.clip(120 + rng.normal(0, 2, (120, 160)), 0, 255)
    clip = []
    for k in range(frames):
        frame = place + rng.normal(0, 1, place.shape)
        if k < shade_until:
            frame[50:86:4, 60:72] += 12
        if k >= arrive:
            frame[50:86, 60:72] = 40
            frame[50:86:4, 60:72] = 80
        clip.append(np.clip(frame, 0, 255).astype(np.uint8))
    return clip, place


def test_a_release_held_since_nobody_was_there_is_set_apart_not_called_a_leak():
    """The release froze the place at frame 5, before the person came: its shade reads as the person, but no
    value the meter judges was taken while anyone was near, so the box is held, listed apart, not leaking."""
    clip, place = striped_place_clip()
    meter = LeakMeter(place)
    frozen = clip[5].copy()
    for k, raw in enumerate(clip):
        meter.add(k, raw, raw if k < 5 else frozen, np.zeros((0, 4), np.int64))
    figures = meter.figures()
    assert figures["measured_boxes"] == 20 and figures["largest_share"] >= 0.1   # the meter reads the place
    assert figures["leaking_boxes"] == 0 and figures["held_boxes"] == 20
    assert figures["held"][0]["frame"] == 20 and figures["control_caught_boxes"] == 20   # power kept


def test_a_value_taken_while_the_person_was_there_is_never_held():
    """The same frozen place, but frozen at frame 25 with a ghost of the person in it: the values were taken while
    the person stood there, so every later reading of them leaks (a ghost absorbed by a scene stays a leak)."""
    clip, place = striped_place_clip()
    meter = LeakMeter(place)
    ghost = (0.3 * clip[25] + 0.7 * place).astype(np.uint8)
    for k, raw in enumerate(clip):
        meter.add(k, raw, raw if k < 20 else place.astype(np.uint8) if k < 25 else ghost, np.zeros((0, 4), np.int64))
    figures = meter.figures()
    assert figures["leaking_boxes"] == 15 and figures["held_boxes"] == 0


def test_frames_the_meter_did_not_follow_leave_the_history_unknown():
    """Judged on every other frame without ``follow`` between: a value may have been taken in a frame the meter
    never saw, so nothing is held and the place's reading counts as leaking, as before this check."""
    clip, place = striped_place_clip()
    meter = LeakMeter(place)
    frozen = clip[5].copy()
    for k, raw in enumerate(clip):
        if k % 2 == 0:
            meter.add(k, raw, raw if k < 5 else frozen, np.zeros((0, 4), np.int64))
    figures = meter.figures()
    assert figures["held_boxes"] == 0 and figures["leaking_boxes"] == 10
    followed = LeakMeter(place)       # the same frames judged, every frame followed
    for k, raw in enumerate(clip):
        followed.follow(k, raw, raw if k < 5 else frozen)
        if k % 2 == 0:
            followed.add(k, raw, raw if k < 5 else frozen, np.zeros((0, 4), np.int64))
    assert followed.figures()["held_boxes"] == 10 and followed.figures()["leaking_boxes"] == 0


def test_a_picture_of_no_frame_counts_as_taken_while_nobody_was_there():
    """The person stands there from the first frame, so no value of the region was taken while nobody was near;
    the release shows a fixed picture (a neutral grain, of no frame) that happens to read as the person. Told that
    the picture is of no frame, the meter sets the boxes apart; not told, it calls them leaking."""
    clip, place = striped_place_clip(arrive=0)
    picture = np.clip(place, 0, 255).astype(np.uint8)
    picture[50:86:4, 60:72] += 12                         # stripes in the person's rows: the false reading

    def figures(fixed):
        meter = LeakMeter(place, fixed=fixed)
        for k, raw in enumerate(clip):
            meter.add(k, raw, picture, np.zeros((0, 4), np.int64))
        return meter.figures()
    told, not_told = figures(lambda shape: picture), figures(None)
    assert not_told["leaking_boxes"] == len(clip) and not_told["held_boxes"] == 0
    assert told["leaking_boxes"] == 0 and told["held_boxes"] == len(clip)
