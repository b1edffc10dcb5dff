"""The leak meter of the camera results (issue 29 part 2): it calls a missed person leaking when the release
shows them, and not when the release shows the empty scene or a neutral one."""
import numpy as np

from sensorveil.benchmarks.leak_meter import LeakMeter, empty_scene


def walking_clip(frames=60):
    rng = np.random.default_rng(0)
    clip = []
    for k in range(frames):
        frame = np.clip(120 + rng.normal(0, 2, (120, 160, 3)), 0, 255).astype(np.uint8)
        x = 10 + 2 * k
        frame[50:86, x:x + 12] = 30
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


def test_a_release_of_the_empty_scene_or_a_neutral_one_does_not_leak():
    clip = walking_clip()
    empty = np.clip(120 + np.zeros((120, 160, 3)), 0, 255).astype(np.uint8)
    assert meter_over(clip, lambda k, raw: empty)["leaking_boxes"] == 0
    assert meter_over(clip, lambda k, raw: np.full_like(raw, 128))["leaking_boxes"] == 0
    ghost = lambda k, raw: (0.3 * raw + 0.7 * empty).astype(np.uint8)     # noqa: E731  a faint ghost: nearer empty
    assert meter_over(clip, ghost)["leaking_boxes"] == 0
    strong = lambda k, raw: (0.7 * raw + 0.3 * empty).astype(np.uint8)    # noqa: E731  a strong one: nearer raw
    assert meter_over(clip, strong)["leaking_boxes"] == len(clip)


def test_people_the_pipeline_privatized_are_left_to_the_audit():
    clip = walking_clip()
    covered = lambda k: np.array([[10 + 2 * k, 50, 12, 36]])             # noqa: E731
    figures = meter_over(clip, lambda k, raw: raw, covered)
    assert figures["not_privatized_boxes"] == 0 and figures["leaking_boxes"] == 0
