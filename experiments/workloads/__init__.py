"""Workloads of the raychaos experiment suite: Ray code that runs inside the cluster.

Each module is shipped into every node (importable there as ``workloads.<module>``) and runs
with the cluster's own Ray. Functions take JSON-able keyword arguments, report progress with
``raychaos_agent.emit`` and return JSON-able results.
"""
