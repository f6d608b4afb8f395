"""Benches: what a boot, the harness's processes and a whole suite run cost on this machine.

Tools, not part of a run: ``raychaos bench boot | processes | suite`` calls them, and the
README's performance section quotes what they measured.
"""
