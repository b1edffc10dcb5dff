"""PASS trained federated on Flower (sensorveil.sdk.mechanisms.pass_federated), one job per module:
config (the settings and their checks), bank (where the server-held substitute bank comes from), folders
(each device's rows in a folder of its own), device (a device's rows and PASS's local steps), server (the
ServerApp, the ClientApp handlers), federation (the spec, simulation or `flwr run`) and apps (the
module-level Flower apps a deployment names)."""
