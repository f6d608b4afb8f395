"""The nemesis role: faults that prove they happened and always heal."""
