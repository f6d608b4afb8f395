"""The cluster role: what to boot (spec), how it is laid out (plan), and the running cluster."""
