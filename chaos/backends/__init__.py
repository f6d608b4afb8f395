"""Backends realise a cluster plan: containers, processes, networks. Only they touch an engine."""
