"""The checker role: bands, windows, strikes and evidence over an experiment's history."""
