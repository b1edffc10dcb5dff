"""sensorveil's research harness: the code the scripts in scripts/ share (results pages' provenance and text, the
camera clip measurements, the bundle fuzzer's mutations, PASS and PR-GAN page settings). The scripts are the
command-line entry points; this package is what they import besides sensorveil. sensorveil never imports it
(.importlinter), and it is not in sensorveil's wheel: it installs from lab/ (pip install -e ./lab)."""
