"""The workload role: Ray code run inside the cluster, its events and its outcome."""
