"""scripts/leak_before.py: an earlier frame must come before the leaking one (the reading says nothing otherwise)."""
import pytest

from tests.conftest import load_script


@pytest.mark.parametrize("before", ["734", "800"])
def test_an_earlier_frame_that_is_not_earlier_is_refused_with_both_frames_named(before, capsys):
    args = ["--bundle", "B", "--clip", "C", "--frame", "734", "--box", "1,2,3,4", "--before", before]
    with pytest.raises(SystemExit) as ended:
        load_script("leak_before").main(args)
    assert ended.value.code == 2
    assert f"--before {before}: expected a frame before --frame 734" in capsys.readouterr().err
