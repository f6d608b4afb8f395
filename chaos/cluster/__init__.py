"""The cluster runtime: boot, readiness, nodes and the running Cluster (the model is chaos.spec)."""
