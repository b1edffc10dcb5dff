"""The camera mechanism's pieces: tracker, detector, crops pasted back, the walkway dataset."""
from __future__ import annotations

import numpy as np
import pytest

from tests.camera_scenes import walk_in_and_stand
from tests.conftest import WALKWAY

cv2 = pytest.importorskip("cv2")

from sensorveil.runtime.camera import (  # noqa: E402
    CROP_SHAPE,
    MotionPeopleDetector,
    PersonCrops,
    Tracker,
    WalkingDirection,
    clean_cut_out,
    crop_people,
    crop_windows,
    iou,
    paste_people,
    stand_out,
)


def walkway():
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
    return str(WALKWAY)


def test_iou_of_known_boxes():
    assert iou([[0, 0, 10, 10]], [[5, 0, 10, 10]])[0, 0] == pytest.approx(50 / 150)
    assert iou([[0, 0, 10, 10]], [[20, 20, 5, 5]])[0, 0] == 0.0


def test_tracker_keeps_identities_of_crossing_synthetic_boxes():
    """Two boxes walk towards each other on different rows, a third appears later and one leaves:
    every box keeps its track id for as long as it is seen, and a gone track's id is never reused."""
    tracker = Tracker()
    seen = {}
    for t in range(40):
        boxes, truth = [[10 + 4 * t, 50, 16, 40], [250 - 4 * t, 120, 16, 40]], ["a", "b"]
        if t >= 15:
            boxes.append([100, 200 + 2 * (t - 15), 16, 40])
            truth.append("c")
        if t >= 30:                      # "a" leaves the scene
            boxes, truth = boxes[1:], truth[1:]
        for name, track in zip(truth, tracker.update(boxes)):
            seen.setdefault(name, set()).add(int(track))
    assert all(len(ids) == 1 for ids in seen.values()), seen
    assert len({next(iter(ids)) for ids in seen.values()}) == 3
    # a new person where "a" was long ago gets a new id
    assert int(tracker.update([[10, 50, 16, 40]])[0]) not in {next(iter(ids)) for ids in seen.values()}


def test_tracker_bridges_a_missed_frame_by_centroid():
    tracker = Tracker(max_missed=3)
    first = tracker.update([[100, 100, 10, 40]])[0]
    tracker.update([])                                   # detector missed the person once
    assert tracker.update([[112, 100, 10, 40]])[0] == first   # moved past IoU 0.2, within reach


def test_walking_direction_from_past_boxes_only():
    direction = WalkingDirection(window=10, min_speed=0.3)
    labels = [direction.update([0, 1, 2], [[100 + 2 * t, 50, 16, 40], [300 - 2 * t, 90, 16, 40],
                                           [200 + 0.1 * t, 150, 16, 40]]).tolist() for t in range(6)]
    assert labels[0] == labels[1] == [-1, -1, -1]          # two points are not a direction yet
    assert labels[5] == [1, 0, -1]                         # right, left, standing (below min_speed)


def read_frames(path, count):
    capture = cv2.VideoCapture(path)
    frames = []
    while len(frames) < count:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames


def test_detector_finds_the_people_of_a_walkway_frame():
    """Frame 100 of walkway.avi has at least five people walking on the path; the detector, having seen
    the frames before it, finds boxes of a person's size there (and none before its warm-up ends)."""
    frames = read_frames(walkway(), 101)
    detector = MotionPeopleDetector()
    counts = [len(detector.detect(frame)) for frame in frames]
    assert counts[0] == 0
    boxes = detector.detect(frames[100])
    assert len(boxes) >= 3, counts[-10:]
    assert (boxes[:, 3] >= 24).all() and (boxes[:, 3] > boxes[:, 2]).all()
    # people stand on the path in the upper middle of the frame, not on the lawn at the bottom
    assert (boxes[:, 1] + boxes[:, 3] < 200).all()


def test_detector_on_opencvs_other_background_model_finds_the_same_people():
    """The KNN model (a second downstream counter for the count check) finds people where MOG2 does."""
    frames = read_frames(walkway(), 101)
    mog2, knn = MotionPeopleDetector(), MotionPeopleDetector(background="knn")
    for frame in frames:
        a, b = mog2.detect(frame), knn.detect(frame)
    assert len(b) >= 3 and (iou(b, a).max(1) > 0.3).mean() >= 0.5
    with pytest.raises(Exception, match="background model 'gmm'"):
        MotionPeopleDetector(background="gmm")


def test_motion_at_half_size_finds_the_same_people_in_frame_pixels():
    """The learned pipeline's motion source sees the frame at half size (MOTION_SCALE): its mask is frame-sized
    and its boxes are frame pixels, on the people the full-size model finds; a scale outside 0.25-1 is refused."""
    frames = read_frames(walkway(), 101)
    full, half = MotionPeopleDetector(), MotionPeopleDetector(scale=0.5)
    for frame in frames:
        a, b = full.detect(frame), half.detect(frame)
    assert half.foreground.shape == half.raw_foreground.shape == frames[0].shape[:2]
    assert len(b) >= 3 and (iou(b, a).max(1) > 0.5).mean() >= 0.75
    with pytest.raises(Exception, match="motion detector scale 2"):
        MotionPeopleDetector(scale=2)


def test_motion_at_a_quarter_cleans_at_its_own_scale_and_finds_the_same_people():
    """At 0.25 the mask is cleaned and labelled at the model's scale (CLEAN_AT_MODEL_SCALE): the frame-sized
    masks are still there, and the boxes are frame pixels on the people the full-size model finds."""
    frames = read_frames(walkway(), 101)
    full, quarter = MotionPeopleDetector(), MotionPeopleDetector(scale=0.25)
    found = []
    for k, frame in enumerate(frames):
        a, b = full.detect(frame), quarter.detect(frame)
        if k >= 60 and len(b):
            found.extend(iou(b, a).max(1) > 0.5 if len(a) else np.zeros(len(b), bool))
    assert quarter.small_foreground.shape == (90, 120)
    assert quarter.foreground.shape == quarter.raw_foreground.shape == frames[0].shape[:2]
    # a quarter's boxes are coarser (4 px steps) whichever scale cleans them: most, not all, reach IoU 0.5
    assert len(found) >= 80 and np.mean(found) >= 0.6


@pytest.mark.parametrize("small, frame", [((90, 120), (360, 480)), ((23, 37), (90, 131))])
def test_model_scale_blobs_map_to_the_frame_pixels_their_enlargement_covers(small, frame):
    """frame_stats gives each model-scale blob the box of its nearest-neighbour enlargement, exactly, also
    where the frame is not a whole multiple of the model's size; the area to within a model pixel's share."""
    import cv2

    from sensorveil.runtime.camera.detect import blob_stats, frame_stats
    mask = ((np.random.default_rng(sum(small)).random(small) > 0.8) * 255).astype(np.uint8)
    count, stats = blob_stats(cv2, mask)
    big = cv2.resize(mask, frame[::-1], interpolation=cv2.INTER_NEAREST)
    big_count, big_stats = blob_stats(cv2, big)
    assert count == big_count > 10
    ours = frame_stats(stats[1:count], small, frame)
    wanted = sorted(map(tuple, big_stats[1:big_count, :4]))
    assert sorted(map(tuple, ours[:, :4])) == wanted
    by_box = {tuple(row[:4]): row[4] for row in big_stats[1:big_count]}
    pixel = frame[0] * frame[1] / float(small[0] * small[1])
    assert all(abs(row[4] - by_box[tuple(row[:4])]) <= pixel * max(1, row[4] / pixel) * 0.5 for row in ours)


def test_a_person_who_walks_in_and_stands_still_stays_found_and_out_of_the_released_scene():
    """A plain background model learns a person who stops into the scene within seconds: the pipeline
    would lose them, and the empty scene it releases would show them. PersonCrops keeps the model from
    learning people it has seen walk in (each for at most max_protect frames)."""
    frames = walk_in_and_stand(200)
    plain, pipeline = MotionPeopleDetector(), PersonCrops(paste="cut-out")
    for frame in frames:
        found_plain, (crops, context) = plain.detect(frame), pipeline.prepare(frame)
    assert len(found_plain) == 0 and np.abs(plain.background()[60:96, 70:82] - 120.0).mean() > 40   # learnt
    assert len(crops) == 1 and abs(int(context[1][0][0]) - 70) <= 3                                # still found
    scene = pipeline.empty_scene(frames[-1])
    # not in the released scene, nowhere: the camera's ground (120) or the neutral grain (about 95-155) is far from 20
    assert np.abs(scene[60:96, 70:82].astype(float) - 20.0).min() > 60
    # where nobody was: the camera's scene, which follows the frame by at most SCENE_STEP a frame (a smoothed
    # picture of the place within the noise's sd of 2, not the last frame itself), not the neutral grain
    assert abs(scene[:40].mean() - 120.0) < 1 and np.abs(scene[:40].astype(float) - frames[-1][:40]).max() <= 10
    capped = PersonCrops(max_protect=50)
    for frame in frames:
        crops, _ = capped.prepare(frame)
    assert len(crops) == 0            # past max_protect the model learns what stays for good


def test_crops_go_back_where_they_came_from():
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
    boxes = np.array([[40, 60, 20, 50], [200, 10, 30, 60], [300, 200, 25, 60]])   # the last runs off the frame
    windows = crop_windows(boxes, frame.shape)
    heights, widths = windows[:, 3] - windows[:, 1], windows[:, 2] - windows[:, 0]
    assert np.abs(heights - 2 * widths).max() <= 2                   # the crop's 2:1 aspect
    crops = crop_people(frame, windows)
    assert crops.shape == (3,) + CROP_SHAPE and crops.dtype == np.uint8
    white = np.full_like(crops, 255)
    pasted = paste_people(frame, white, windows)
    inside = np.zeros(frame.shape[:2], bool)
    for x0, y0, x1, y1 in windows:
        inside[max(y0, 0):y1, max(x0, 0):x1] = True
    assert (pasted[inside] == 255).all()
    np.testing.assert_array_equal(pasted[~inside], frame[~inside])   # nothing outside the boxes changes
    for x, y, w, h in boxes:                                          # each person's box is covered
        assert inside[y:min(y + h, 240), x:min(x + w, 320)].all()
    # grey crops of the same frame, pasted back unchanged, reproduce it within resampling error
    gray = frame.mean(axis=2).astype(np.uint8)
    smooth = cv2.GaussianBlur(gray, (0, 0), 6)
    again = paste_people(smooth, crop_people(smooth, windows), windows)
    assert np.abs(again.astype(int) - smooth.astype(int)).max() <= 6


def test_cut_out_paste_erases_the_person_and_pastes_only_the_substitute():
    frame = np.full((120, 160, 3), 100, np.uint8)
    background = np.full_like(frame, 50)
    windows = np.array([[40, 20, 72, 84]])                   # a 64x32 window
    cut_out = np.zeros((1,) + CROP_SHAPE, np.uint8)
    cut_out[0, 32:96, 16:48] = 200                            # the substitute: a block in the crop's middle
    out = paste_people(frame, cut_out, windows, background)
    assert (out[36:68, 48:64] == 200).all()                   # the substitute person
    assert (out[20:30, 40:72] == 50).all() and (out[20:84, 40:44] == 50).all()   # the rest of the window: scene
    outside = np.ones(frame.shape[:2], bool)
    outside[20:84, 40:72] = False
    assert (out[outside] == 100).all()


def test_cut_out_paste_fits_the_substitute_to_the_detected_box():
    frame = np.full((120, 160, 3), 100, np.uint8)
    background = np.full_like(frame, 50)
    windows = np.array([[40, 20, 72, 84]])
    box = np.array([[50, 30, 12, 40]])                        # the detected person inside the window
    cut_out = np.zeros((1,) + CROP_SHAPE, np.uint8)
    cut_out[0, 10:60, 5:20] = 200                             # a substitute off-centre in its crop
    out = paste_people(frame, cut_out, windows, background, boxes=box)
    person = out[..., 0] == 200
    rows, cols = np.flatnonzero(person.any(1)), np.flatnonzero(person.any(0))
    assert (rows[0], rows[-1] + 1, cols[0], cols[-1] + 1) == (30, 70, 50, 62)   # exactly the box
    assert person.sum() == 12 * 40


def test_cut_out_paste_clears_every_window_before_pasting_any():
    frame = np.full((120, 160), 100, np.uint8)
    background = np.full_like(frame, 50)
    windows = np.array([[40, 20, 72, 84], [60, 20, 92, 84]])  # overlapping windows of two people
    boxes = np.array([[50, 30, 12, 40], [70, 30, 12, 40]])
    cut_outs = np.zeros((2,) + CROP_SHAPE, np.uint8)
    cut_outs[0, 10:60, 5:20] = 200
    cut_outs[1, 10:60, 5:20] = 150
    out = paste_people(frame, cut_outs, windows, background, boxes=boxes)
    assert (out[30:70, 50:62] == 200).all()                  # the first person survives the second's window
    assert (out[30:70, 70:82] == 150).all()


def test_cut_out_paste_keeps_people_side_by_side_apart_for_a_downstream_counter():
    """Two people walking side by side, their boxes 3 px apart: stretched to their boxes the substitutes
    would be one blob; pasted, they stay two after the counter's own clean-up (closing 5x9)."""
    frame = np.full((120, 160), 100, np.uint8)
    background = np.full_like(frame, 50)
    boxes = np.array([[50, 30, 12, 40], [65, 34, 12, 40]])       # 3 px apart: a 5x9 closing bridges it
    windows = crop_windows(boxes, frame.shape)
    cut_outs = np.zeros((2,) + CROP_SHAPE, np.uint8)
    cut_outs[:, 10:60, 5:20] = 200
    out = paste_people(frame, cut_outs, windows, background, boxes=boxes)
    person = (out == 200).astype(np.uint8)
    closed = cv2.morphologyEx(person, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 9)))
    assert cv2.connectedComponents(closed)[0] - 1 == 2
    assert person[:, 50:62].sum() > 0.6 * 12 * 40 and person[:, 65:77].sum() > 0.6 * 12 * 40
    alone = paste_people(frame, cut_outs[:1], windows[:1], background, boxes=boxes[:1])
    assert ((alone == 200).sum()) == 12 * 40                  # a person with nobody near keeps every pixel


def standing(x, y, h=40, w=12):
    """One placed person for keep_apart: (x, y, patch, mask), a solid h x w figure."""
    return (x, y, None, np.ones((h, w), bool))


def test_keep_apart_puts_the_nearer_person_in_front_whole_and_the_farther_one_behind_it():
    """A crowd seen from above: the person whose feet are lower in the frame is nearer the camera. They are
    pasted whole; the one behind loses only what is within the gap of them, and stays one piece."""
    from sensorveil.runtime.camera.composite import PERSON_GAP, keep_apart
    behind, front = standing(50, 20), standing(56, 45)          # front's feet lower, overlapping behind's legs
    (_, _, _, behind_shown), (_, _, _, front_shown) = keep_apart([behind, front])
    assert front_shown.all()                                    # nothing taken out of the nearer person
    assert behind_shown[:45 - 20 - PERSON_GAP[1]].all()         # above the front one's zone: all in view
    assert not behind_shown[45 - 20 - PERSON_GAP[1]:].any()     # within it: hidden (all its columns are)
    assert cv2.connectedComponents(behind_shown.astype(np.uint8))[0] - 1 == 1


def test_keep_apart_pastes_no_piece_of_a_person_mostly_hidden_behind_a_nearer_one():
    """What shows of a person behind others is pasted only as one piece of at least LEAST_IN_VIEW of them: a
    head on its own, or two legs either side of a nearer person, is not a person to anyone looking."""
    from sensorveil.runtime.camera.composite import LEAST_IN_VIEW, keep_apart
    head_only = keep_apart([standing(50, 20), standing(48, 30, w=16)])[0][3]
    assert not head_only.any()                                   # 2 rows of 40 would show: pasted as nobody
    wide = (50, 20, None, np.ones((40, 60), bool))               # split in two by a narrow nearer person
    shown = keep_apart([wide, standing(80, 15, h=50)])[0][3]    # its zone: columns 74-97 of the frame
    assert shown[:, :24].all() and not shown[:, 24:].any()       # the larger piece, 40% of them; not the other
    assert shown.sum() >= LEAST_IN_VIEW * wide[3].sum()


def test_cut_out_paste_thickens_thin_limbs_so_a_counters_opening_keeps_them():
    frame = np.full((120, 160), 100, np.uint8)
    background = np.full_like(frame, 50)
    box = np.array([[50, 30, 9, 40]])
    cut_out = np.zeros((1,) + CROP_SHAPE, np.uint8)
    cut_out[0, 10:60, 5:20] = 200                             # a body
    cut_out[0, 60:110, 12:14] = 200                           # and a leg a pixel wide once pasted
    out = paste_people(frame, cut_out, crop_windows(box, frame.shape), background, boxes=box)
    person = (out >= 150).astype(np.uint8)                  # pasted: at least 100 above the scene
    opened = cv2.morphologyEx(person, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3)))
    rows = np.flatnonzero(opened.any(1))
    assert rows[-1] - rows[0] + 1 >= 0.9 * 40                 # the leg survives: the person keeps its height


def test_a_tall_pasted_person_keeps_their_own_outline():
    """From THICKEN_BELOW px a limb is wide enough for a counter's opening: the pasted person is not grown."""
    from sensorveil.runtime.camera.composite import THICKEN_BELOW
    frame = np.full((200, 160), 100, np.uint8)
    background = np.full_like(frame, 50)
    cut_out = np.zeros((1,) + CROP_SHAPE, np.uint8)
    cut_out[0, 10:60, 5:20] = 200                             # a body
    cut_out[0, 60:110, 12:14] = 200                           # and a leg a pixel or so wide once pasted
    for height, grown in ((THICKEN_BELOW - 20, True), (THICKEN_BELOW, False)):
        box = np.array([[50, 20, 30, height]])
        out = paste_people(frame, cut_out, crop_windows(box, frame.shape), background, boxes=box)
        leg = (out[20 + int(0.8 * height)] >= 150).sum()     # the leg's width, low on the pasted person
        assert (leg >= 3) == grown, (height, leg)


def test_stand_out_moves_the_person_away_from_the_scene_on_its_own_side():
    scene = np.array([[120, 120, 120, 240, 10]], np.uint8)
    person = np.array([[130, 100, 120, 250, 5]], np.uint8)
    out = stand_out(person, scene, margin=60)
    # lighter stays lighter, darker stays darker (and below 0.45 of the scene: no shadow to a background
    # model), a tie goes to the side with room, no room: the other side
    assert out.tolist() == [[180, 54, 180, 108, 70]]
    assert (np.abs(out.astype(int) - scene) >= 60).all()
    darker = out < scene
    assert (out[darker] <= 0.45 * scene[darker]).all()


def test_a_colour_person_stands_out_as_far_as_a_grey_one():
    from sensorveil.runtime.camera.composite import stand_out_colour
    from sensorveil.runtime.camera.detect import to_gray
    rng = np.random.default_rng(0)
    person = rng.integers(1, 256, (64, 32, 3)).astype(np.uint8)
    person[0, :3] = [(255, 0, 0), (0, 0, 255), (0, 40, 0)]     # saturated: lifting them clips a channel
    for level in (20, 128, 230):
        scene = np.full((64, 32), level, np.uint8)
        out = stand_out_colour(person, scene)
        # a counter on grey sees what stand_out gives the grey person, to a grey level: clipped
        # channels included (a blue scaled up alone would stay far darker than the margin asks)
        wanted = stand_out(to_gray(person), scene).astype(int)
        assert np.abs(to_gray(out).astype(int) - wanted).max() <= 1
        assert (out.max(-1).astype(int) - out.min(-1)).mean() > 30   # and it still has colour


def test_a_person_on_the_neutral_grey_keeps_the_neutral_gap_and_on_the_camera_its_own_colours():
    """The gap is per pixel: a colour person pasted across a neutral block and a camera block keeps at least
    the neutral gap (and below SHADOW_RATIO when darker) on the first and their own colours on the second
    (CAMERA_CONTRAST, decision 0016)."""
    from sensorveil.runtime.camera.composite import PERSON_CONTRAST, SHADOW_RATIO, fit_person, place_person
    from sensorveil.runtime.camera.detect import to_gray
    from sensorveil.runtime.camera.scene import CAMERA_CONTRAST
    rng = np.random.default_rng(1)
    crop = rng.integers(1, 256, (128, 64, 3)).astype(np.uint8)
    background = np.full((120, 160, 3), 128, np.uint8)
    contrast = np.full((120, 160), 60, np.int16)
    contrast[:, 80:] = CAMERA_CONTRAST                     # the right half shows the camera
    x, y, patch, person = place_person(crop, (40, 10, 120, 110), (60, 20, 40, 80), background, contrast)
    gap = np.abs(to_gray(patch).astype(int) - 128)
    left = gap[:, :20][person[:, :20]]
    assert left.min() >= 59
    assert (to_gray(patch)[:, :20][person[:, :20]] < 128).any() and left.max() < PERSON_CONTRAST - 1
    darker = to_gray(patch)[:, :20][person[:, :20] & (to_gray(patch)[:, :20] < 128)]
    assert darker.max() <= np.floor(SHADOW_RATIO * 128) + 1
    own = fit_person(crop, (40, 10, 120, 110), (60, 20, 40, 80))[2]
    assert np.array_equal(patch[:, 20:][person[:, 20:]], own[:, 20:][person[:, 20:]])


def test_the_quiet_scene_gives_the_neutral_gap_until_a_block_shows_the_camera():
    from sensorveil.runtime.camera.scene import CAMERA_CONTRAST, QuietScene
    frame, busy = np.full((32, 128), 90, np.uint8), np.zeros((32, 128), bool)
    busy[:, 64:] = True                                    # the right half never quiet: the left is revealed
    scene = QuietScene(frame.shape, horizon=2, block=8, neutral_contrast=60)
    first = scene.contrast
    assert (first == 60).all()
    for _ in range(3):
        scene.update(frame, busy)
    assert (scene.contrast[:, :48] == CAMERA_CONTRAST).all() and (scene.contrast[:, 72:] == 60).all()
    assert (first == 60).all()                             # an earlier frame's map is never changed under it
    still = np.full((32, 128), 60, np.uint8)               # an operator's still is a picture: the camera's gap
    assert (QuietScene(frame.shape, still=still, neutral_contrast=60).contrast == CAMERA_CONTRAST).all()


def test_clean_cut_out_keeps_one_solid_person():
    cut_out = np.zeros(CROP_SHAPE, np.uint8)
    cut_out[20:110, 20:44] = 120                              # the person
    cut_out[60:63, 25:40] = 0                                 # a gap across the waist
    cut_out[5:12, 55:62] = 90                                 # a piece of a neighbour at the edge
    cleaned = clean_cut_out(cut_out)
    assert (cleaned[5:12, 55:62] == 0).all()                  # the neighbour's piece is gone
    assert (cleaned[60:63, 25:40] > 0).all()                  # the gap is closed, non-zero = person
    assert (cleaned[cut_out == 120] == 120).all() and cleaned.dtype == np.uint8   # its own pixels kept
    assert (clean_cut_out(np.zeros(CROP_SHAPE, np.uint8)) == 0).all()


def test_person_crops_key_each_crop_by_its_tracked_person():
    frames = read_frames(walkway(), 120)
    pre = PersonCrops(paste="cut-out")
    keys = [pre.keys(pre.prepare(frame)[1]) for frame in frames]
    assert max(len(k) for k in keys) >= 2
    assert len(set(keys[-2]) & set(keys[-1])) >= 2           # the same people, the same keys, frame to frame
    with pytest.raises(Exception, match="paste mode"):
        PersonCrops(paste="blend")


def test_held_draws_keep_one_substitute_per_key_and_walk_its_sequence():
    from sensorveil.runtime.stages.substitution import HeldDraws
    held = HeldDraws(np.array([1, 2, 0, 4, 3]), frames_per_step=2)
    assert held(np.array([0, 3]), ["a", "b"], known=[1, -1]).tolist() == [0, 3]
    assert held(np.array([4, 4]), ["a", "b"], known=[1, -1]).tolist() == [0, 3]   # later draws are not used
    assert held(np.array([4, 4]), ["a", "b"], known=[1, -1]).tolist() == [1, 4]   # every 2nd call: the next crop
    # "b"'s direction becomes known: drawn once more, among the people who walk that way
    assert held(np.array([2, 2]), ["a", "b"], known=[1, 0]).tolist() == [1, 2]
    assert held(np.array([3, 3]), ["a", "b"], known=[1, 1]).tolist() == [2, 2]    # one frame's flip does not redraw
    assert held.needs_draw(["a", "b"], known=[1, 1]).tolist() == [False, False]
    assert held(np.array([3, 3]), ["a", "b"], known=[1, 1]).tolist() == [2, 0]    # "b" turned for 2 calls: held
    assert held.needs_draw(["a", "b"], known=[1, 1]).tolist() == [False, True]    # the 3rd turned call redraws
    assert held(np.array([3, 3]), ["a", "b"], known=[1, 1]).tolist() == [0, 3]    # drawn on the way "b" walks now
    assert held(np.array([4, 4]), ["a", "b"], known=[1, -1]).tolist() == [0, 3]   # unknown again: held as drawn
    still = HeldDraws(None, forget_after=2)
    assert still(np.array([3]), ["a"]).tolist() == [3]
    assert [still(np.array([1]), ["a"]).tolist() for _ in range(3)] == [[3]] * 3  # no sequence: it stays
    for _ in range(3):
        still(np.array([0]), ["c"])
    assert still(np.array([4]), ["a"]).tolist() == [4]             # gone longer than forget_after: a new draw


def test_bank_sequences_follow_each_person_in_clip_order():
    from sensorveil.sdk.mechanisms.pass_substitution import bank_sequences
    rows, track = np.array([5, 1, 3, 2, 9]), np.array([0, 0, 1, 0, 1])
    assert bank_sequences(rows, track).tolist() == [1, 3, 4, 0, 2]
    # with the direction too: a person who turned is two sequences
    assert bank_sequences(rows, track, np.array([0, 0, 1, 1, 1])).tolist() == [1, 0, 4, 3, 2]


def test_person_crops_round_trip_on_walkway():
    frames = read_frames(walkway(), 120)
    pre = PersonCrops()
    for frame in frames[:-1]:
        pre.prepare(frame)
    crops, context = pre.prepare(frames[-1])
    assert len(crops) >= 2 and crops.shape[1:] == CROP_SHAPE
    out = pre.restore(np.full(crops.shape, 77.0, np.float32), context)
    assert out.shape == frames[-1].shape
    for x, y, w, h in context[1]:
        assert (out[y:y + h, x:x + w] == 77).all()              # each person is covered
    inside = np.zeros(out.shape[:2], bool)
    for x0, y0, x1, y1 in context.windows:
        inside[max(y0, 0):max(y1, 0), max(x0, 0):max(x1, 0)] = True
    scene = pre.empty_scene(frames[-1])                          # around them the quiet scene, not the frame
    assert (out[~inside] == scene[~inside]).all()


def test_walkway_dataset_labels_and_time_split():
    from sensorveil.sdk.datasets import load_dataset
    data = load_dataset("walkway", walkway())
    a = data.attributes
    assert data.x.shape[1:] == CROP_SHAPE and data.x.dtype == np.uint8 and len(data) > 500
    assert set(a) == {"appearance", "direction", "track", "trial_split"}
    for split in (0, 1):                                        # every class on both sides of the split
        rows = a["trial_split"] == split
        assert np.bincount(a["appearance"][rows], minlength=4).min() > 0
        assert np.bincount(a["direction"][rows], minlength=2).min() > 0
    # split by time: few tracks straddle the cut, so the test part is mostly people never seen in training
    first, second = set(a["track"][a["trial_split"] == 0]), set(a["track"][a["trial_split"] == 1])
    assert len(first & second) <= 0.25 * len(first | second)
    # an appearance class is a set of whole tracks
    for track in np.unique(a["track"]):
        assert len(np.unique(a["appearance"][a["track"] == track])) == 1
    prior = data.prior("direction", "appearance")
    np.testing.assert_allclose(prior.sum(1), 1.0)


TORCH_FREE_PIPELINE = r"""
import sys
sys.modules["torch"] = None            # any import of torch fails: the runtime must not need it
import numpy as np
from sensorveil.runtime import Privatizer
from sensorveil.runtime.sources import open_source
from sensorveil.runtime.stream import Stream
bundle, clip = sys.argv[1], sys.argv[2]
privatizer = Privatizer.load(bundle, output="sample", seed=0)
stream = Stream(privatizer, open_source(clip), frames=90)
people = changed_inside = outside_not_scene = raw_outside = 0
directions = []
assert privatizer.conditioned_on == "direction"
for result in stream:
    image, out = result.frame.data, result.output
    assert out.shape == image.shape and out.dtype == np.uint8
    inside = np.zeros(image.shape[:2], bool)
    for x0, y0, x1, y1 in stream.preprocessor.last_windows:
        inside[max(y0, 0):y1, max(x0, 0):x1] = True
    diff = (out != image).any(axis=2)
    scene = stream.preprocessor.empty_scene(image)     # around the substitutes: the empty scene, not the frame
    people += len(result.sample)
    directions += stream.preprocessor.last_directions.tolist()
    changed_inside += int(diff[inside].sum())
    outside_not_scene += int((out != scene).any(axis=2)[~inside].sum())
    learning = stream.preprocessor.detector.seen <= stream.preprocessor.detector.warmup
    # while the scene is learnt: coarse blocks of colour, no edge sharp enough to outline a person
    steps = [np.abs(np.diff(out.astype(int), axis=a)).max() for a in (0, 1)]
    raw_outside += int(learning and max(steps) > 8)
print(stream.preprocessed, people, changed_inside, outside_not_scene, raw_outside)
assert "person-crops" in stream.preprocessed and people > 20
assert changed_inside > 1000 and outside_not_scene == 0
assert raw_outside == 0                                 # the first frames do not go out as the camera saw them
assert len(directions) == people and {0, 1} <= set(directions)   # the tracker saw people walk both ways
assert "torch" not in [m.split(".")[0] for m in sys.modules if sys.modules[m] is not None]
"""


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_camera_bundle_runs_torch_free_on_walkway(tmp_path):
    """A (tiny) PASS bundle trained on walkway crops: its manifest carries the camera pipeline, and the
    runtime, with torch unimportable, detects, substitutes every person and pastes back, nothing else."""
    import subprocess
    import sys
    from pathlib import Path

    from sensorveil.export import export_run
    from sensorveil.runtime.bundle import read_manifest
    from sensorveil.sdk.runs import train_run
    run = train_run("pass", "walkway", data_path=walkway(), out=tmp_path / "run", epochs=1, attacker_epochs=1,
                    dataset_options={"stride": 8},
                    settings={"substitutes": 32, "embedding_dim": 32, "progress": False, "condition": "direction"})
    bundle = export_run(run, "onnx", tmp_path / "bundle", person_detector="motion")
    camera = read_manifest(Path(bundle))["camera"]
    assert camera["crop_shape"] == list(CROP_SHAPE) and camera["paste"] == "cut-out"
    draw = read_manifest(Path(bundle))["pipeline"][1]
    assert draw["bank_source"]["source"] == "rendered" and draw["bank_source"]["real_people"] is False
    cut_outs = np.load(Path(bundle) / "substitutes.npy")
    assert 0.05 < (cut_outs == 0).mean() < 0.95  # people cut out of their crops
    draw = read_manifest(Path(bundle))["pipeline"][1]
    assert draw["sequence"]["frames_per_step"] == 8  # the bank's crops were taken every 8 frames
    following = np.load(Path(bundle) / draw["sequence"]["next"])
    from sensorveil.runtime import Privatizer

    privatizer = Privatizer.load(bundle, output="index", seed=0)
    assert "no real person" in privatizer.describe()["substitutes"]
    crops = np.random.default_rng(0).integers(0, 256, (3,) + CROP_SHAPE, dtype=np.uint8)
    first = privatizer(crops, known=[1, 1, 0], keys=[7, 8, 9])
    held = [privatizer(crops, known=[1, 1, 0], keys=[7, 8, 9]) for _ in range(8)]
    assert all((h == first).all() for h in held[:-1]) and (held[-1] == following[first]).all()
    with pytest.raises(Exception, match="keys holds 2 values for a batch of 3"):
        privatizer(crops, keys=[7, 8])
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", TORCH_FREE_PIPELINE, str(bundle), walkway()],
        cwd=root,
        env={**__import__("os").environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    check_colour_substitutes(Path(bundle), walkway())
    check_scene_still(Path(bundle), walkway(), tmp_path)
    from sensorveil.sdk.assess import audit_path  # the clip's split is by time: scored with label-shift weights

    audited = audit_path(bundle, seeds=1, attacker_epochs=1)
    assert "re-id omni-scale" in audited["private"] and "omni-scale" in audited["raw_private"]
    assert audited["n_effective"] < audited["n_test"] and "unweighted" in audited
    assert audited["random_star"] != audited["unweighted"]["random_star"]


def test_the_quiet_scene_shows_the_camera_only_where_nobody_was_for_the_horizon():
    """The released scene starts neutral (or from the operator's still), not from the first raw frames; a slow
    walker, whom a background model learns into its picture as a trail, never gets into it; and a scene handed
    to an earlier frame is never changed under it."""
    from sensorveil.runtime.camera.scene import QuietScene, busy_mask, neutral_scene
    rng = np.random.default_rng(1)
    scene, detector = QuietScene((120, 160), horizon=30), MotionPeopleDetector()
    first = scene.image
    trail = np.zeros((120, 160), bool)
    for k in range(150):
        frame = np.clip(120 + rng.normal(0, 2, (120, 160)), 0, 255).astype(np.uint8)
        x = 20 + k // 2                                  # half a pixel a frame: slower than MOG2 can tell
        frame[50:86, x:x + 12] = 20
        trail[50:86, x:x + 12] = True
        boxes = detector.detect(frame)
        scene.update(frame, busy_mask(frame.shape, detector.foreground, boxes))
    # a neutral start, never edited in place
    assert (first == neutral_scene(first.shape)).all() and first is not scene.image
    assert np.abs(scene.image[trail].astype(float) - 20.0).min() > 90     # no pixel of the walker, anywhere
    assert np.abs(scene.image[:30].astype(float) - 120.0).max() < 10      # the quiet top: the camera's scene
    still = np.full((120, 160), 60, np.uint8)
    assert (QuietScene((120, 160), still=still).image == 60).all()
    from sensorveil.runtime.errors import InputError
    with pytest.raises(InputError, match="scene still of shape"):
        QuietScene((120, 160), still=np.zeros((10, 10), np.uint8))



def test_the_quiet_scene_never_reveals_a_region_a_counter_would_take_for_a_person():
    """Camera pixels replace the grey at once, and a background-model counter downstream reads the change as
    something new: an upright revealed region is a person to it. Such a region stays grey; a wide one and one
    taller than any person are revealed (sensorveil/runtime/camera/scene.py, REVEAL_EVERY and TALLEST_PERSON)."""
    from sensorveil.runtime.camera.scene import QuietScene, neutral_scene, unpersonlike_regions
    blocks = np.zeros((45, 60), bool)
    blocks[2:8, 1:3] = True                  # 16 x 48 px, upright: a person's shape
    blocks[10:12, 5:20] = True               # 120 x 16 px, wide
    blocks[12:44, 40:42] = True              # 16 x 256 px, taller than any person
    kept = unpersonlike_regions(blocks, 8)
    assert not kept[2:8, 1:3].any() and kept[10:12, 5:20].all() and kept[12:44, 40:42].all()
    assert not (kept & ~blocks).any()
    frame = np.full((120, 160), 90, np.uint8)
    upright, wide = np.ones((120, 160), bool), np.ones((120, 160), bool)
    upright[16:80, 64:88] = False            # quiet 3 x 8 blocks, of which 1 x 6 stay clear of the busy edge
    wide[16:40, 16:144] = False
    for busy, shown in ((upright, False), (wide, True)):
        scene = QuietScene(frame.shape, horizon=5)
        for _ in range(30):
            scene.update(frame, busy)
        assert bool(scene.shown.any()) == shown and bool((scene.image == 90).any()) == shown
        assert bool((scene.image[~busy] == neutral_scene(scene.image.shape)[~busy]).all()) != shown


def test_the_quiet_scene_reveals_together_once_every_reveal_every_updates():
    """Blocks quiet for the horizon are revealed together on every REVEAL_EVERY-th update (the horizon by
    default), so a counter absorbs one reveal before the next; between, they stay grey."""
    from sensorveil.runtime.camera.scene import QuietScene
    frame = np.full((64, 160), 90, np.uint8)
    busy = np.ones((64, 160), bool)
    scene = QuietScene(frame.shape, horizon=4, reveal_every=10)
    shown_at = []
    for update in range(1, 31):
        if update == 3:
            busy[:] = False                   # all quiet from the third update: ready at the sixth
        scene.update(frame, busy)
        shown_at.append(bool(scene.shown.any()))
    assert shown_at.index(True) == 9          # the tenth update, not the sixth
    assert QuietScene(frame.shape, horizon=7).reveal_every == 7


@pytest.mark.parametrize("field", ["horizon", "block", "reveal_every"])
def test_the_quiet_scene_refuses_a_zero_horizon_block_or_reveal_step(field):
    """A horizon of 0 took every block for quiet, busy ones too (the camera's people shown); a reveal step of 0
    divided by zero. Each is one error naming the field."""
    from sensorveil.runtime.camera.scene import QuietScene
    from sensorveil.runtime.errors import InputError
    with pytest.raises(InputError, match="quiet scene {} 0; expected a whole number of at least 1".format(field)):
        QuietScene((64, 96), **{field: 0})


def quiet_camera(rng, level=100.0, shape=(64, 96, 3)):
    """A still colour camera at ``level`` with a little sensor noise (sd 1.5 grey levels)."""
    return np.clip(level + rng.normal(0, 1.5, shape), 0, 255).astype(np.uint8)


def test_the_quiet_scene_never_learns_a_person_nobody_detected_who_walks_into_a_quiet_block():
    """A person no detector finds (busy stays False) who appears in a block that already shows the camera is
    not copied into the released scene, that frame or after standing there for twice the horizon: the block
    stays as it was (stale, failing closed) while the rest of the scene keeps following the camera."""
    from sensorveil.runtime.camera.scene import QuietScene
    rng, horizon = np.random.default_rng(2), 10
    scene, nobody = QuietScene((64, 96, 3), horizon=horizon), np.zeros((64, 96), bool)
    for _ in range(2 * horizon):
        scene.update(quiet_camera(rng), nobody)
    assert np.abs(scene.image.astype(float) - 100).max() < 8          # the quiet camera shows
    before = scene.image
    person = (slice(20, 44), slice(30, 42))                             # not on the 8 px block grid
    for _ in range(2 * horizon + 1):
        frame = quiet_camera(rng)
        frame[person] = (40, 160, 90)                                   # another colour than the place
        released = scene.update(frame, nobody)
        assert (released[person] == before[person]).all()               # no pixel of them, ever
    assert before is not released and np.abs(before.astype(float) - 100).max() < 8   # never edited in place
    far = (slice(0, 8), slice(80, 96))
    for k in range(2 * horizon + 10):
        frame = quiet_camera(rng, 100 + k)                              # the light slowly gets brighter ...
        frame[person] = (40, 160, 90)
        released = scene.update(frame, nobody)
    assert (released[person] == before[person]).all()
    assert released[far].mean() > before[far].mean() + 20               # ... and the scene follows it away from them


def test_the_quiet_scene_never_learns_a_low_contrast_person_who_edges_in_a_pixel_a_frame():
    """Someone who walks in slowly, a pixel a frame and only 30 grey levels off the place, changes each block
    a little at a time; the scene moves at most SCENE_STEP a frame, so they cannot be learnt column by column."""
    from sensorveil.runtime.camera.scene import QuietScene
    rng, horizon = np.random.default_rng(3), 10
    scene, nobody = QuietScene((64, 96, 3), horizon=horizon), np.zeros((64, 96), bool)
    for _ in range(2 * horizon):
        scene.update(quiet_camera(rng), nobody)
    trail = np.zeros((64, 96), bool)
    for x in range(60):
        frame = quiet_camera(rng)
        frame[16:48, x:x + 12] = 130
        trail[16:48, x:x + 12] = True
        released = scene.update(frame, nobody)
    assert released[trail].astype(float).max() < 110                    # at most a step or two of them


def test_the_quiet_scene_follows_a_slow_lighting_drift_and_starts_neutral():
    """Light that changes a grey level a frame is followed (the scene drifts with it); before a block has been
    quiet for the horizon it shows the neutral scene, whatever the camera sees."""
    from sensorveil.runtime.camera.scene import QuietScene, neutral_scene
    rng, horizon = np.random.default_rng(4), 10
    scene, nobody = QuietScene((64, 96, 3), horizon=horizon), np.zeros((64, 96), bool)
    for _ in range(horizon - 1):
        assert (scene.update(quiet_camera(rng, 60), nobody) == neutral_scene((64, 96, 3))).all()
    scene.update(quiet_camera(rng, 60), nobody)                        # the horizon: the camera shows
    assert np.abs(scene.image.astype(float) - 60).max() < 8
    for k in range(80):
        frame = quiet_camera(rng, 60 + k)                               # +1 grey level a frame
        released = scene.update(frame, nobody)
    assert abs(released.mean() - frame.mean()) < 2 and released.mean() > 130

def check_colour_substitutes(bundle, clip):
    """A camera bundle from colour crops ships its bank people in colour too: the same
    cut-outs as the grey ones; a stream pastes them in colour; a colour bank whose people are not where the
    grey ones are is refused at load."""
    import json
    import shutil

    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.bundle import BundleError
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream, load_for_stream
    grey, colour = np.load(bundle / "substitutes.npy"), np.load(bundle / "substitutes_colour.npy")
    assert colour.shape == grey.shape + (3,) and (colour.any(axis=-1) == (grey > 0)).all()
    crops = np.random.default_rng(0).integers(0, 256, (3,) + CROP_SHAPE, dtype=np.uint8)
    drawn = Privatizer.load(bundle, output="colour", seed=0)(crops, known=[1, 1, 0])
    assert drawn.shape == (3,) + CROP_SHAPE + (3,) and drawn.dtype == np.uint8
    stream = Stream(load_for_stream(bundle, seed=0), open_source(clip), frames=60)
    tinted = 0
    for result in stream:
        assert result.output.shape == result.frame.data.shape
        for x, y, w, h in stream.preprocessor.last_boxes:
            person = result.output[y:y + h, x:x + w].astype(int)
            tinted += int((np.abs(person[..., 0] - person[..., 2]) > 12).sum())
    assert tinted > 100                        # pasted people carry colour, not grey in every channel
    from sensorveil_lab.camera_pipeline import release_output, stream_privatizer
    assert release_output(bundle) == "colour"                  # the camera page counts this release
    loaded = stream_privatizer(bundle, seed=0)                 # and times it as a stream runs
    assert loaded.output_mode == "colour" and loaded.backend_options["cpu_policy"] == "shared"
    broken = bundle.parent / "colour-moved"
    shutil.copytree(bundle, broken)
    moved = np.roll(colour, 3, axis=2)
    np.save(broken / "substitutes_colour.npy", moved)
    manifest = json.loads((broken / "manifest.json").read_text())
    from sensorveil.runtime.bundle import file_record
    manifest["files"]["substitutes_colour.npy"] = file_record(broken / "substitutes_colour.npy")
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="not where the grey"):
        Privatizer.load(broken, output="colour")


def check_scene_still(bundle, clip, tmp_path):
    """An operator's still of the empty place is where the released scene starts, from the
    Python API and from `sensorveil run --scene-still`; a still of another size releases nothing."""
    import cv2

    from sensorveil.cli import main
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream, load_for_stream
    shape = cv2.VideoCapture(str(clip)).read()[1].shape
    still = np.zeros(shape, np.uint8)
    still[:] = (200, 40, 90)                    # a colour no grey start and no camera frame has everywhere
    stream = Stream(load_for_stream(bundle, seed=0, scene_still=still), open_source(clip), frames=3)
    for result in stream:
        outside = np.ones(shape[:2], bool)
        for x0, y0, x1, y1 in stream.preprocessor.last_windows:
            outside[max(y0, 0):max(y1, 0), max(x0, 0):max(x1, 0)] = False
        assert outside.mean() > 0.5 and (result.output[outside] == still[outside]).all()
    cv2.imwrite(str(tmp_path / "still.png"), still)
    assert main(["run", str(bundle), "--source", str(clip), "--frames", "2", "--scene-still",
                 str(tmp_path / "still.png"), "--sink", f"png:{tmp_path / 'released'}"]) == 0
    released = cv2.imread(str(sorted((tmp_path / "released").glob("*.png"))[0]))
    assert (released == still).all(axis=-1).mean() > 0.5
    small = Stream(load_for_stream(bundle, scene_still=still[:100]), open_source(clip), frames=3)
    assert list(small) == [] and "scene still of shape" in small.report()["errors"][0]
