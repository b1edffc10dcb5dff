"""The trainer side: datasets, networks, mechanisms, training, federated training and the audit.

Importing it sets OpenMP's passive wait policy before torch loads (sensorveil.sdk.threads says why)."""
from sensorveil.sdk.threads import prefer_passive_waits

prefer_passive_waits()
