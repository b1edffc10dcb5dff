"""PASS trained federated on Flower (sensorveil.sdk.mechanisms.pass_federated), one job per module:
config (the settings and their checks), device (a device's rows and PASS's local steps), server (the
ServerApp, the ClientApp handlers), federation (the spec, simulation or `flwr run`) and apps (the
module-level Flower apps a deployment names)."""
