"""The experiments' verdicts: one pure function per claim over what a run recorded.

Each module is a family's (``serve`` for SERVE-…); each function is written with
``chaos.testing.verdict`` and returns a ``Verdict`` — held, failed (a finding where it is
one) or unknown — without Docker, so ``tests/unit/`` judges it on recorded data. The
experiment gathers the record and hands the verdict to ``experiment.judge``.
"""
