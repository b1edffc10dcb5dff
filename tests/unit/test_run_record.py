"""run.json as a RunRecord (sensorveil.sdk.rundir): a written record reads back as it was, mechanism sections
included, and a missing or malformed shared field is one error naming the file and the field."""
from __future__ import annotations

import json

import pytest

from sensorveil.sdk.rundir import RunRecord, RunRecordError, read_run, write_run

RUN = {"sensorveil_version": "0.1", "mechanism": "pass", "useful": ["parity"], "private": "lt5",
       "dataset": {"name": "digits", "path": None, "options": {}}, "modality": "image", "model_shape": [1, 8, 8],
       "input": {"name": "x"}, "output": {"name": "y"}, "seed": 0, "kind": "substitution",
       "config": {"seed": 0}, "metrics": {"probing_acc_private": 0.5}, "substitution": {"bank_size": 4},
       "confusion_plot": None, "train_seconds": 1.5}


def test_a_record_reads_back_as_written_with_its_sections(tmp_path):
    write_run(tmp_path, RUN)
    run = read_run(tmp_path)
    assert json.loads((tmp_path / "run.json").read_text()) == RUN == run.to_json()
    assert (run.mechanism, run.model_shape, run.dataset.name, run.seed) == ("pass", (1, 8, 8), "digits", 0)
    assert run.sections == {"substitution": {"bank_size": 4}, "confusion_plot": None}
    assert run.selection is None and "selection" not in run.to_json()
    assert run["metrics"] == RUN["metrics"] and run.get("hidden", []) == []    # scripts read keys still


@pytest.mark.parametrize("change, field", [
    ({"seed": None}, "seed"), ({"seed": "0"}, "seed"), ({"useful": 3}, "useful"),
    ({"model_shape": [1, "8"]}, "model_shape"), ({"dataset": {"path": "x"}}, "dataset.name"),
    ({"metrics": []}, "metrics"),
])
def test_a_bad_field_is_one_error_naming_it(tmp_path, change, field):
    (tmp_path / "run.json").write_text(json.dumps({**RUN, **change}))
    with pytest.raises(RunRecordError, match=rf"run.json: field '{field}'"):
        read_run(tmp_path)


def test_a_missing_field_is_named():
    with pytest.raises(RunRecordError, match="field 'modality' is missing"):
        RunRecord.from_json({key: value for key, value in RUN.items() if key != "modality"})
