"""scripts/neutral_scene.py: the substitutes the independent counter finds are matched one to one, as the camera
audit matches people at their place."""
from tests.conftest import load_script


def test_one_found_box_finds_one_pasted_person_not_two():
    script = load_script("neutral_scene")
    pasted = [(100, 50, 30, 80), (104, 52, 30, 80)]      # two people side by side, nearly one place
    assert script.found_share(pasted, [(102, 51, 30, 80)]) == 1
    assert script.found_share(pasted, [(100, 50, 30, 80), (104, 52, 30, 80)]) == 2
    assert script.found_share(pasted, [(300, 50, 30, 80)]) == 0
    assert script.found_share(pasted, []) == 0 and script.found_share([], [(100, 50, 30, 80)]) == 0
