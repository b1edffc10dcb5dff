"""The camera pipeline's fast paths (OpenCV's masked copy, saturating arithmetic, integral image and dilation,
views instead of gathers, dilation of each person's own rectangle) against the plain numpy definitions they
replace: the same bytes out."""
import numpy as np
import pytest

pytest.importorskip("cv2")

from sensorveil.runtime.camera import composite, detect, scene  # noqa: E402


def reference_step(still, frame, step):
    moved = np.clip(frame.astype(np.int16) - still.astype(np.int16), -step, step)
    return (still.astype(np.int16) + moved).astype(np.uint8)


def reference_block_sums(values, block):
    """Each block's sum by reshaping a zero-padded copy: the definition."""
    h, w = values.shape[:2]
    rows, cols = -(-h // block), -(-w // block)
    padded = np.zeros((rows * block, cols * block) + values.shape[2:], dtype=np.int64)
    padded[:h, :w] = values
    return padded.reshape((rows, block, cols, block) + values.shape[2:]).sum(axis=(1, 3))


def reference_block_any(mask, block):
    return reference_block_sums(mask.astype(np.int64), block) > 0


@pytest.mark.parametrize("shape", [(360, 480, 3), (61, 90), (37, 50, 3), (8, 8)])
def test_block_sums_and_block_any_give_the_definitions_answers(shape):
    rng = np.random.default_rng(len(shape) + shape[0])
    values = rng.integers(0, 256, shape, dtype=np.uint8)
    assert np.array_equal(scene.block_sums(values, 8), reference_block_sums(values, 8))
    wide = rng.integers(-40000, 40000, shape[:2], dtype=np.int32)         # another dtype: summed exactly
    assert np.array_equal(scene.block_sums(wide, 8), reference_block_sums(wide, 8))
    sparse = rng.random(shape[:2]) > 0.995                                 # a pixel here and there
    assert np.array_equal(scene.block_any(sparse, 8), reference_block_any(sparse, 8))


@pytest.mark.parametrize("shape", [(360, 480), (61, 90), (37, 50), (8, 8)])
def test_busy_blocks_are_the_blocks_of_the_busy_mask(shape):
    """The pipeline's block-level busy (no frame-sized mask) against block_any of busy_mask: boxes inside, across
    every edge, wholly off the frame and degenerate; a uint8 foreground (the motion detector's 0/127/255), none."""
    rng = np.random.default_rng(shape[0])
    h, w = shape
    boxes = np.concatenate([rng.integers(-60, max(h, w) + 60, (40, 2)), rng.integers(-5, 80, (40, 2))], axis=1)
    boxes = np.concatenate([boxes, [[w, h, 5, 5], [-30, -30, 10, 10], [0, 0, 0, 0], [w - 1, h - 1, 1, 1]]])
    foreground = (rng.random(shape) > 0.998).astype(np.uint8) * rng.choice([127, 255], shape).astype(np.uint8)
    for mask in (foreground, np.zeros(shape, np.uint8), None):
        for count in (0, 1, len(boxes)):
            expected = scene.block_any(scene.busy_mask(shape, mask, boxes[:count]), 8)
            assert np.array_equal(scene.busy_blocks(shape, mask, boxes[:count], 8), expected)


def reference_update(state, frame, busy):
    """QuietScene.update as numpy alone: per-pixel masks, numpy's masked copy, int16 arithmetic."""
    diff = np.abs(frame.astype(np.int16) - state.image.astype(np.int16)).astype(np.uint8)
    sums = reference_block_sums(diff, state.block)
    pixels = reference_block_sums(np.ones(frame.shape[:2], np.int64), state.block)
    changed = state.shown & ((sums if sums.ndim == 2 else sums.max(axis=2)) / pixels > state.change)
    busy_blocks = scene.dilate(reference_block_any(busy, state.block) | changed)
    state.quiet = np.where(busy_blocks, 0, np.minimum(state.quiet + 1, state.horizon))
    ready = state.quiet >= state.horizon
    h, w = state.image.shape[:2]

    def pixels(blocks):
        mask = np.repeat(np.repeat(blocks, state.block, 0), state.block, 1)[:h, :w]
        return mask if state.image.ndim == 2 else mask[..., None]
    # which quiet blocks are revealed is a rule, not a fast path: the scene's own (tested in test_camera.py)
    state.updates += 1
    revealed = state.revealed(ready & ~state.shown)
    image = state.image.copy()
    np.copyto(image, frame, where=pixels(revealed))
    np.copyto(image, reference_step(state.image, frame, scene.SCENE_STEP), where=pixels(ready & state.shown))
    state.shown, state.image = state.shown | revealed, image
    return image


@pytest.mark.parametrize("shape", [(64, 96, 3), (61, 90), (37, 50, 3)])
def test_quiet_scene_update_gives_the_numpy_definitions_bytes(shape):
    rng = np.random.default_rng(sum(shape))
    fast, plain = (scene.QuietScene(shape, horizon=3, reveal_every=1) for _ in range(2))
    base = rng.integers(0, 256, shape).astype(np.int16)
    for k in range(12):
        # small noise (followed), a jump in one corner (refused as changed) and a moving busy box
        frame = np.clip(base + rng.integers(-4, 5, shape), 0, 255).astype(np.uint8)
        if k > 6:
            frame[:16, :16] = 255 - frame[:16, :16]
        busy = np.zeros(shape[:2], bool)
        busy[5 + 2 * k:25 + 2 * k, 10:30] = True
        out = fast.update(frame, busy)
        assert np.array_equal(out, reference_update(plain, frame, busy))
        assert np.array_equal(fast.shown, plain.shown) and np.array_equal(fast.quiet, plain.quiet)
    assert fast.shown.any() and not fast.shown.all()


def test_step_towards_is_a_clipped_difference():
    rng = np.random.default_rng(3)
    still, frame = (rng.integers(0, 256, (40, 50, 3), dtype=np.uint8) for _ in range(2))
    frame[0, :3, 0], still[0, :3, 0] = (0, 255, 7), (255, 0, 7)      # the extremes and no change
    assert np.array_equal(scene.step_towards(still, frame, 2), reference_step(still, frame, 2))


def reference_keep_apart(placed, gap=composite.PERSON_GAP):
    """keep_apart with each person's near zone dilated over the whole canvas."""
    import cv2
    ring = cv2.getStructuringElement(cv2.MORPH_RECT, (2 * gap[0] + 1, 2 * gap[1] + 1))
    left, top = min(p[0] for p in placed) - gap[0], min(p[1] for p in placed) - gap[1]
    width = max(p[0] + p[3].shape[1] for p in placed) + gap[0] - left
    height = max(p[1] + p[3].shape[0] for p in placed) + gap[1] - top
    taken, apart = np.zeros((height, width), dtype=bool), list(placed)
    for k in composite.nearest_first(placed):
        x, y, patch, person = placed[k]
        where = np.s_[y - top:y - top + person.shape[0], x - left:x - left + person.shape[1]]
        shown = composite.in_view(person & ~taken[where], person)
        apart[k] = (x, y, patch, shown)
        near = np.zeros((height, width), dtype=np.uint8)
        near[where] = shown
        taken |= cv2.dilate(near, ring) > 0
    return apart


def test_keep_apart_matches_dilation_over_the_whole_canvas():
    rng = np.random.default_rng(5)
    placed = []
    for _ in range(9):
        h, w = (int(v) for v in rng.integers(8, 60, 2))
        person = rng.random((h, w)) > 0.3
        placed.append((int(rng.integers(-20, 120)), int(rng.integers(-20, 80)), None, person))
    for fast, plain in zip(composite.keep_apart(placed), reference_keep_apart(placed)):
        assert fast[:2] == plain[:2] and np.array_equal(fast[3], plain[3])


def test_cut_inside_and_past_the_frame_and_stand_out_give_the_plain_definitions():
    rng = np.random.default_rng(7)
    gray = rng.integers(0, 256, (30, 40), dtype=np.uint8)
    for window in [(3, 4, 20, 25), (0, 0, 40, 30), (-5, -2, 10, 12), (30, 20, 45, 36)]:
        x0, y0, x1, y1 = window
        rows, cols = np.clip(np.arange(y0, y1), 0, 29), np.clip(np.arange(x0, x1), 0, 39)
        assert np.array_equal(composite.cut(gray, window), gray[rows[:, None], cols[None, :]])
    person, behind = (rng.integers(0, 256, (50, 50), dtype=np.uint8) for _ in range(2))
    behind[0, :4], person[0, :4] = (0, 99, 100, 255), (0, 0, 0, 255)
    p, s = person.astype(np.int16), behind.astype(np.int16)
    lighter = np.where(p != s, p > s, s < 128)
    lighter = np.where(s + 100 > 255, False, np.where(s - 100 < 0, True, lighter))
    darkest = np.minimum(s - 100, np.floor(composite.SHADOW_RATIO * s)).astype(np.int16)
    plain = np.clip(np.where(lighter, np.maximum(p, s + 100), np.minimum(p, darkest)), 1, 255).astype(np.uint8)
    assert np.array_equal(composite.stand_out(person, behind, 100), plain)


@pytest.mark.parametrize("colour", [True, False])
def test_standing_out_every_person_in_one_call_gives_each_persons_own_call(colour):
    rng = np.random.default_rng(11)
    background = rng.integers(0, 256, (90, 120, 3) if colour else (90, 120), dtype=np.uint8)
    contrast = rng.choice(np.array([70, 100], np.int16), (90, 120))
    patches, corners = [], []
    for _ in range(7):          # some past the frame's edge (the scene behind them edge-replicated)
        h, w = (int(v) for v in rng.integers(4, 40, 2))
        patches.append(rng.integers(1, 256, (h, w, 3) if colour else (h, w), dtype=np.uint8))
        corners.append((int(rng.integers(-10, 110)), int(rng.integers(-10, 80))))
    for margin in (None, contrast):
        together = composite.stand_out_people(patches, corners, background, margin)
        for patch, (x, y), out in zip(patches, corners, together):
            alone = composite.stand_out_people([patch], [(x, y)], background, margin)[0]
            assert out.shape == patch.shape and np.array_equal(out, alone)


def test_a_pixels_grey_is_the_same_in_a_window_and_in_the_whole_frame():
    rng = np.random.default_rng(13)
    frame = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    grey = detect.to_gray(frame)
    for window in [(3, 4, 50, 90), (-5, -2, 40, 30), (150, 100, 170, 130)]:
        assert np.array_equal(detect.to_gray(composite.cut(frame, window)), composite.cut(grey, window))
    assert np.array_equal(composite.crop_people(frame, np.array([(3, 4, 50, 90)])),
                          composite.crop_people(grey, np.array([(3, 4, 50, 90)])))
    with_alpha = np.concatenate([frame, rng.integers(0, 256, (120, 160, 1), dtype=np.uint8)], axis=2)
    assert np.array_equal(detect.to_gray(with_alpha), grey)
    floats = frame.astype(np.float32) @ detect.BGR_TO_GRAY       # the float definition, within a level
    assert np.abs(grey - floats).max() <= 1


def test_masked_copy_without_cv2_copyto_gives_the_same_bytes(monkeypatch):
    """OpenCV 3 (Debian buster's, the Coral's Mendel) has no cv2.copyTo: the numpy path copies the same pixels."""
    import cv2
    rng = np.random.default_rng(9)
    for shape in [(40, 56, 3), (40, 56)]:
        source, target = (rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(2))
        mask = (rng.random(shape[:2]) > 0.5).astype(np.uint8)
        with_copyto = target.copy()
        scene.masked_copy(source, mask, with_copyto)
        without = type("OpenCV3", (), {name: getattr(cv2, name) for name in dir(cv2) if name != "copyTo"})
        monkeypatch.setattr(scene, "opencv", lambda: without)
        plain = target.copy()
        scene.masked_copy(source, mask, plain)
        monkeypatch.undo()
        expected = np.where(mask.astype(bool) if len(shape) == 2 else mask.astype(bool)[..., None], source, target)
        assert np.array_equal(with_copyto, expected) and np.array_equal(plain, expected)


def blobs_of(count, stats):
    """The blobs as a sorted list of (x, y, w, h, area) rows, whatever order the labels came in."""
    return sorted(tuple(int(v) for v in row) for row in stats[1:count])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blob_stats_in_16_bits_finds_the_32_bit_labellings_blobs(seed):
    """16-bit labels give the blobs 32-bit labels give (the boxes detect keeps cannot change), also on a
    mask holding the most blobs a 480x360 frame can: a checkerboard of single pixels."""
    import cv2
    rng = np.random.default_rng(seed)
    mask = np.zeros((360, 480), dtype=np.uint8)
    for _ in range(12):        # people-sized blocks, some touching, plus speckle
        x, y = rng.integers(0, 460), rng.integers(0, 320)
        mask[y:y + rng.integers(5, 60), x:x + rng.integers(3, 25)] = 255
    mask[rng.random(mask.shape) > 0.995] = 255
    dots = np.zeros((360, 480), dtype=np.uint8)
    dots[::2, ::2] = 255
    for image in (mask, dots):
        count, _, stats, _ = cv2.connectedComponentsWithStats(image, connectivity=8, ltype=cv2.CV_32S)
        assert blobs_of(*detect.blob_stats(cv2, image)) == blobs_of(count, stats)
    assert detect.blob_stats(cv2, dots)[0] == 180 * 240 + 1


def test_blob_stats_labels_a_frame_too_big_for_16_bits_in_32():
    import cv2
    dots = np.zeros((720, 1280), dtype=np.uint8)
    dots[::2, ::2] = 255
    assert detect.blob_stats(cv2, dots)[0] == 360 * 640 + 1


def test_the_foreground_threshold_drops_shadows_as_the_plain_comparison_does():
    """The motion detector's mask keeps MOG2's foreground (255) and drops its shadows (127), as fg > 200 did."""
    fg = np.tile(np.array([0, 127, 200, 201, 255], dtype=np.uint8), (8, 4))
    detector = detect.MotionPeopleDetector()
    detector.model = type("FixedModel", (), {"apply": lambda self, frame, learningRate=-1: fg.copy()})()
    detector.mask(np.zeros(fg.shape, dtype=np.uint8))
    assert np.array_equal(detector.raw_foreground, np.where(fg > 200, 255, 0).astype(np.uint8))


def test_walking_speed_is_polyfits_slope():
    from sensorveil.runtime.camera import track
    rng = np.random.default_rng(4)
    for n in (3, 7, 10):
        t = np.arange(100, 100 + n, dtype=np.float64)
        x = 200 + rng.normal(0, 1, n).cumsum() + 0.4 * t
        assert track.slope(np.stack([t, x], axis=1)) == pytest.approx(np.polyfit(t, x, 1)[0], abs=1e-9)


def test_walking_direction_labels_are_polyfits_also_on_exact_ties_with_the_threshold():
    """Box centres are half pixels, so a slope can equal min_speed exactly; there polyfit's rounding decides,
    as it did before the closed-form slope. Random walks of half-pixel steps hit such ties."""
    from sensorveil.runtime.camera import track

    def polyfit_labels(history):
        t, x = np.asarray(history).T
        speed = np.polyfit(t, x, 1)[0]
        return int(speed > 0) if abs(speed) >= 0.3 else -1

    rng = np.random.default_rng(5)
    ties = 0
    for _ in range(300):
        direction, history = track.WalkingDirection(window=10, min_speed=0.3), []
        x = 2 * rng.integers(50, 400)
        for frame in range(14):
            x += rng.integers(-1, 3)
            label = direction.update([0], [[x, 10, 1, 40]])[0]     # centre x + 0.5
            history = (history + [(frame, x + 0.5)])[-10:]
            if len(history) >= 3:
                ties += abs(abs(track.slope(np.asarray(history))) - 0.3) < 1e-6
                assert label == polyfit_labels(history)
    assert ties > 0


@pytest.mark.parametrize("channels", [0, 3, 4])
def test_the_learned_graph_sees_the_rgb_frame_shrunk_as_before(channels):
    """find shrinks the frame and then orders its channels RGB: the same pixels as shrinking the RGB frame
    (the reversed-channel copy it replaced), for BGR, BGRA and grey frames."""
    import cv2

    from sensorveil.runtime.camera import learned
    rng = np.random.default_rng(channels)
    frame = rng.integers(0, 256, (361, 479, channels) if channels else (361, 479), dtype=np.uint8)
    seen = []

    def run_graph(graph, batch):
        seen.append(batch)
        return np.zeros((1, 0, 6), dtype=np.float32)

    learned.LearnedPeopleDetector(run_graph).find(frame)
    rgb = frame[..., 2::-1] if channels else np.repeat(frame[..., None], 3, 2)
    height, width = learned.DETECTOR_INPUT
    assert len(seen) == 2            # two square tiles of 361 px: left at 0 and at 479 - 361
    for batch, left in zip(seen, (0, 479 - 361)):
        tile = np.ascontiguousarray(rgb[:, left:left + 361])
        before = cv2.resize(tile, (width, height), interpolation=cv2.INTER_AREA)
        assert batch.shape == (1, height, width, 3) and np.array_equal(batch[0], before)


def test_square_tiles_cover_the_frame_and_a_person_cut_by_a_tile_is_found_once():
    from sensorveil.runtime.camera import learned
    assert learned.square_tiles(360, 640) == [(0, 0, 360), (0, 280, 360)]
    assert learned.square_tiles(360, 360) == [(0, 0, 360)]
    assert learned.square_tiles(640, 360) == [(0, 0, 360), (280, 0, 360)]
    assert learned.square_tiles(100, 1000)[-1] == (0, 900, 100) and len(learned.square_tiles(100, 1000)) == 10
    whole, other = [300, 40, 50, 200], [500, 40, 40, 150]
    cut = [300, 40, 30, 200]                        # the same person, cut at a tile's right edge
    merged = learned.merge_tiles(np.array([cut, whole, other]))
    assert sorted(merged.tolist()) == sorted([whole, other])


def test_a_substitute_keeps_its_own_proportions_in_a_wide_box():
    """Scaled to the box's height, centred, never wider than the box: stretched to a box holding two people
    (or a bag) a substitute becomes a squat blob that a detector downstream does not read as a person."""
    person = (100, 40)                                          # rows, cols: a person 0.4 as wide as tall
    assert composite.own_width(person, 10, 80, 50) == (10 + (80 - 20) // 2, 20)     # wide box: own width
    assert composite.own_width(person, 10, 12, 50) == (10, 12)                      # narrow box: the box's
    crop = np.zeros((128, 64, 3), np.uint8)
    crop[10:110, 12:52] = 200
    x, y, patch, mask, in_box = composite.fit_person(crop, (0, 0, 64, 128), (100, 30, 90, 50))
    assert in_box and (x, y) == (100 + (90 - 20) // 2, 30) and patch.shape[:2] == (50, 20) and mask.all()


def test_a_box_without_width_keeps_the_substitute_at_its_own_x():
    assert composite.own_width((100, 40), 10, 0, 50) == (10, 1)


class ThreadsSeen:
    """A detector that finds nobody and notes how many threads OpenCV runs its ops on while it looks."""

    def __init__(self):
        self.threads = []

    def detect(self, frame):
        self.threads.append(detect.opencv().getNumThreads())
        return np.zeros((0, 4), dtype=np.int64)

    def protect(self, boxes):
        pass


def test_the_pipeline_runs_opencv_on_the_calling_thread_and_gives_the_callers_setting_back():
    from sensorveil.runtime.camera import pipeline

    cv2 = detect.opencv()
    before = cv2.getNumThreads()
    try:
        cv2.setNumThreads(2)
        seen = ThreadsSeen()
        crops = pipeline.PersonCrops(detector=seen, paste="cut-out")
        frame = np.full((72, 96, 3), 90, dtype=np.uint8)
        samples, context = crops.prepare(frame)
        released = crops.restore(samples, context)
        assert seen.threads == [pipeline.OPENCV_THREADS] and pipeline.OPENCV_THREADS == 1
        assert cv2.getNumThreads() == 2 and released.shape == frame.shape
        crops.opencv_threads = None                 # left as it is: the caller's pool runs the ops
        crops.prepare(frame)
        assert seen.threads[-1] == 2 and cv2.getNumThreads() == 2
    finally:
        cv2.setNumThreads(before)
