"""Markdown pieces the results pages share: percentages, intervals, wrapped paragraphs, where an entry's figures
come from, and the lines of a bundle's audit over seeds."""
import textwrap


def pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def percent(value) -> str:
    """A share in percent with its sign, "-" where there is none."""
    return "-" if value is None else f"{100 * value:.1f}%"


def cell(figure: "dict | None") -> str:
    """A mean with its 95% interval, in percent, "-" where there is none."""
    if not figure:
        return "-"
    return f"{100 * figure['mean']:.1f} [{100 * figure['low']:.1f}, {100 * figure['high']:.1f}]"


def families_text(private: dict) -> str:
    """Every attacker family's mean, in percent, on one line."""
    return "; ".join(f"{name} {100 * figure['mean']:.1f}" for name, figure in private.items())


def para(text: str) -> str:
    """A paragraph wrapped at 120 columns (tables are left as they are)."""
    return textwrap.fill(text, 120, break_long_words=False, break_on_hyphens=False)


def interval(figure: dict) -> str:
    if figure.get("low") is None or figure.get("high") is None:
        return pct(figure.get("mean"))
    return f"{pct(figure['mean'])} [{pct(figure['low'])}, {pct(figure['high'])}]"


def audited(entry: dict) -> "dict | None":
    """The bundle's audit over seeds and attacker families, or None (not run, or from before the audit)."""
    device = entry.get("bundle_evaluation")
    return device if isinstance(device, dict) and isinstance(device.get("private"), dict) else None


def where_from(entry: dict) -> str:
    record = entry.get("provenance") if isinstance(entry.get("provenance"), dict) else {}
    commit = f"commit {record['commit']}" if record.get("commit") else "a commit not recorded"
    return f"computed {entry.get('timestamp', 'at a time not recorded')}, from {commit}"


def audit_lines(entry: dict) -> list:
    device = audited(entry)
    if device is None:
        return ["The exported bundle was not audited over seeds in this run.", ""]
    lines = [para(f"The exported bundle, attacked as the device runs it (`sensorveil evaluate`, "
                  f"{device.get('backend', '?')}): each attacker family trains {device.get('attacker_epochs', '?')} "
                  f"epochs on the bundle's released training split over {device['seeds']} seeds and is scored on its "
                  "test split; mean with its 95% interval."), "",
             "| attacker | private accuracy [95% interval] |", "|---|---:|"]
    lines += [f"| {family} | {interval(figure)} |" for family, figure in device["private"].items()]
    within = device["goal"]["strongest_within_5_points_of_random_star"]
    lines += [f"| useful probe (utility) | {interval(device['useful'])} |", "",
              para(f"Strongest: {device['strongest_attacker']}; Random* {pct(device['random_star'])}; strongest within "
                   f"5 points of Random*: {'yes' if within else 'NO'}."), ""]
    return lines



COUNT_COLUMNS = ("counter | counted as raw (JPEG 90) | within 10 points | release more, fewer | people raw, released")


def count_cells(count: dict) -> str:
    """One counter's count of a release as table cells (COUNT_COLUMNS): frames counted as raw, against the
    JPEG-90 floor, whether within the goal's 10 points, which way the release is off, and the people counted."""
    return (f"{100 * count['same_count']:.1f}% ({100 * count['floor_same_count']:.1f}%) | "
            f"{'yes' if count['holds'] else 'no'} | {100 * count['released_more']:.1f}%, "
            f"{100 * count['released_fewer']:.1f}% | {count['raw_people']:,}, {count['released_people']:,}")


def share_of(part, whole) -> str:
    """``part`` of ``whole`` in percent, "-" where the whole is none."""
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def count_table(first_column: str, rows) -> list:
    """A count table's lines (COUNT_COLUMNS after ``first_column``): one row per (label, counter, count)."""
    lines = [f"| {first_column} | {COUNT_COLUMNS} |", "|---|---|---|---|---|---|"]
    return lines + [f"| {label} | {counter} | {count_cells(count)} |" for label, counter, count in rows]


def found_lines(rows) -> list:
    """A bullet per (label, found in the release, found in raw, pasted): the pasted people an independent
    counter finds at their place in the release, and at the same places in the raw frames."""
    return [f"- {label}: {share_of(released, pasted)} of {pasted:,} pasted, in the release; the same places in the raw "
            f"frames: {share_of(raw, pasted)}." for label, released, raw, pasted in rows]
