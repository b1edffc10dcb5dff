"""The parts of PASS (sensorveil.sdk.mechanisms.pass_substitution, the registered mechanism), one job
per module: config (PASSConfig and its defaults), model (embedding networks f, SubstitutionModel,
SubstitutionHead), losses (eq. 3-8 and eq. 10's constant), data (splits and the substitute bank), train
(Algorithm 1 and pre-training), bundle (run directory and bundle files), evaluate (NAG / mNAG under the
probing attack, releases for the audit) and plots (appendix F.2's confusion figure)."""
