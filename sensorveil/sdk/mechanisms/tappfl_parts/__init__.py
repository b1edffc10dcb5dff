"""The parts of TAPPFL (sensorveil.sdk.mechanisms.tappfl, the registered mechanism), one job per module:
config (TAPPFLConfig, its checks, and the per-round settings a device receives), model (f_Theta, g_Psi,
h_Omega), losses (the bounds of eq. 2-7 and the objective f descends), device (Algorithm 1's DeviceUpdate
and the local attack probe), data (the rows each device trains on), client (the ClientApp's train and
evaluate handlers), server (the ServerApp's rounds), federation (running one from train()), apps (the
module-level Flower apps a deployment names), evaluate (attackers on the released representations) and
bundle (the run directory's files and the bundle entry)."""
