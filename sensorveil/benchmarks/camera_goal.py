"""The camera goal, part by part: one verdict that says "goal met" only when every part holds.

Parts (each holds, fails, or has no verdict, with why):

* identity: the re-identification audit (sdk.reid_audit) protects: its attacker has power on raw crops and the
  released rank-1 is within 2x chance with a tight interval, and the bank shows none of this camera's people;
* attributes: the attribute audit (the attackers trained on released crops) protects, where it ran;
* leak meter: no person the offline detectors find is shown raw, and the meter has power (its control ghost
  is caught in at least CONTROL_POWER of the boxes it judges);
* recall: the pipeline covers at least 85% of the reference people (clip_audit.RECALL_GOAL);
* count: every counter in the goal (the pipeline's and an independent one) agrees with the raw clip within 10
  points of the JPEG-90 floor's agreement.

A part that failed makes the goal "goal not met"; otherwise a part without a verdict (no power, too few
people, not measured) makes it "no verdict". The dicts read here are the audits' own JSON.
"""
from sensorveil.benchmarks.clip_audit import COUNT_POINTS

CONTROL_POWER = 0.9       # the leak meter's control ghost must be caught in this share of the judged boxes


def part(holds, why: str) -> dict:
    return {"holds": holds, "why": why}


def identity_part(identity: dict) -> dict:
    """A verdict other than protects or leaks ("no power", "no verdict", "not measured") holds no verdict."""
    holds = {"protects": True, "leaks": False}.get(identity["verdict"])
    return part(holds, f"{identity['verdict']}: {identity['why']}")


def attribute_part(audit) -> dict:
    holds = {"protects": True, "leaks": False}.get(audit["verdict"])
    return part(holds, f"{audit['verdict']}: the strongest attacker on released crops against Random*")


def leak_part(leak: dict) -> dict:
    judged, caught = leak["measured_boxes"], leak["control_caught_boxes"]
    if judged == 0 or caught < CONTROL_POWER * judged:
        return part(None, f"no power: the control ghost is caught in {caught} of {judged} judged boxes "
                          f"(needs {CONTROL_POWER:.0%})")
    held = leak.get("held_boxes", 0)    # an audit's JSON from before the meter set them apart has none
    held_said = f"; {held} more read as leaking on values from before the person came" if held else ""
    return part(leak["leaking_boxes"] == 0, f"{leak['leaking_boxes']} leaking boxes of {leak['offline_boxes']} "
                                            f"people found offline ({judged} judged; control caught in {caught}"
                                            f"{held_said})")


def recall_part(recall: dict) -> dict:
    if recall["share"] is None:
        return part(None, "no reference people on the scored frames")
    low, high = recall["interval"]
    return part(recall["holds"], f"{recall['share']:.1%} [{low:.1%}, {high:.1%}] of {recall['reference_people']} "
                                 f"reference people covered (goal {recall['goal']:.0%}; found by "
                                 f"{recall['reference']})")


def count_part(count: dict) -> dict:
    """The counters in the goal (clip_audit.counter_factories; a record without ``in_goal`` judged them all)."""
    judged = {name: c for name, c in count.items() if c.get("in_goal", True)}
    lines = [f"{name} {c['same_count']:.1%} (JPEG-90 {c['floor_same_count']:.1%})" for name, c in judged.items()]
    beside = [f"{name} {c['same_count']:.1%} beside the goal" for name, c in count.items() if name not in judged]
    return part(all(c["holds"] for c in judged.values()),
                "frames counted as raw: " + ", ".join(lines) + f", within {COUNT_POINTS * 100:.0f} points"
                + "".join(f"; {line}" for line in beside))


def camera_goal(clip: "dict | None", identity: dict, attributes: "dict | None" = None) -> dict:
    """{"verdict", "why", "parts"} from the clip audit (clip_audit.audit_clip), the identity audit and, where
    it ran, the attribute audit's verdict row."""
    parts = {"identity": identity_part(identity)}
    if attributes is not None:
        parts["attributes"] = attribute_part(attributes)
    if clip is None:
        parts["clip"] = part(None, "not measured: leak meter, recall and count need the clip (--clip)")
    else:
        parts.update(leak_meter=leak_part(clip["leak_meter"]), recall=recall_part(clip["recall"]),
                     count=count_part(clip["count"]))
    failed = [name for name, p in parts.items() if p["holds"] is False]
    open_parts = [name for name, p in parts.items() if p["holds"] is None]
    if failed:
        return {"verdict": "goal not met", "why": "fails: " + ", ".join(failed), "parts": parts}
    if open_parts:
        return {"verdict": "no verdict", "why": "no verdict on: " + ", ".join(open_parts), "parts": parts}
    return {"verdict": "goal met", "why": "every part holds", "parts": parts}


def format_goal(goal: dict) -> str:
    """The parts as terminal lines (under 100 columns where the reasons allow), then the verdict."""
    mark = {True: "holds", False: "FAILS", None: "no verdict"}
    lines = [f"  {name:<11} {mark[p['holds']]:<10} {p['why']}" for name, p in goal["parts"].items()]
    return "\n".join(["camera goal, part by part:", *lines, f"  verdict: {goal['verdict']} ({goal['why']})"])


def format_people_there(clip: dict) -> str:
    """Beside the goal, the count a user reads: each counter's count of the raw frames and of the release against
    the people there are (a ground truth where the audit was given one, else the recall's reference people on its
    scored frames), as people off a frame with 95% intervals."""
    counts = {name: c for name, c in clip["count"].items() if c.get("reference_frames")}
    if not counts:
        return "count against the people there are: not measured (no scored frame)"
    first = next(iter(counts.values()))
    source = clip.get("count_reference", "reference people")
    lines = ["count against the people there are, beside the goal: people a count is off a frame [95%]",
             f"  ({source}: {first['reference_people']:,} people on {first['reference_frames']} frames)"]
    lines += [f"  {name:<14} raw {off(c, 'raw')}, release {off(c, 'released')} ({nearer(c)})"
              for name, c in counts.items()]
    return "\n".join(lines)


def off(count: dict, video: str) -> str:
    low, high = count[f"{video}_error_vs_reference_interval"]
    return f"{count[f'{video}_error_vs_reference']:.2f} [{low:.2f}, {high:.2f}]"


def nearer(count: dict) -> str:
    """Which of raw and release is counted nearer the people there are: only where the intervals part."""
    raw, released = count["raw_error_vs_reference_interval"], count["released_error_vs_reference_interval"]
    if released[1] < raw[0]:
        return "release nearer"
    if released[0] > raw[1]:
        return "release further"
    return "as near"
