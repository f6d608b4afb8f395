"""The timeline picture: measured windows drawn against their bands, labels never overlapping."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from chaos.history import History, Kind, Source
from chaos.report.timeline import Window, figure, place, rate_series, render, windows

NAMES = {"10.0.0.1": "head", "10.0.0.2": "worker-1", "10.0.0.3": "driver"}


def _history() -> History:
    """A busy experiment: two kills close together, a burst of workload events, two windows."""
    h = History()
    t = 1000.0
    for ip in NAMES:
        h.record(Source.OBSERVER, Kind.NODE_STATE, t=t, node_ip=ip, node_id=ip, state="ALIVE")
    for i, kind in enumerate(["started", "ready", "step", "step", "step", "task_running"]):
        h.record("workload-1", kind, t=t + 1 + 0.3 * i)
    for i in range(12):  # many distinct events within a few seconds
        h.record("workload-1", f"attempt_{i}", t=t + 5 + 0.2 * i)
    h.record(Source.NEMESIS, Kind.INJECT, t=t + 4, fault="kill_node", target="worker-1")
    h.record(Source.NEMESIS, Kind.INJECT, t=t + 4.2, fault="kill_raylet", target="head:raylet")
    h.record(
        Source.OBSERVER, Kind.NODE_STATE, t=t + 9, node_ip="10.0.0.2", node_id="10.0.0.2",
        state="DEAD",
    )  # fmt: skip
    h.record(
        Source.CHECKER, Kind.MEASUREMENT, t=t + 9, name="kill → DEAD (s)", value=5.0,
        band=[2.0, 21.0], start=t + 4,
    )  # fmt: skip
    h.record(
        Source.CHECKER, Kind.MEASUREMENT, t=t + 9, name="late (s)", value=30.0,
        band=[2.0, 21.0], start=t + 4.2,
    )  # fmt: skip
    h.record(Source.CHECKER, Kind.MEASUREMENT, t=t + 9, name="no band", value=1.0)
    return h


def test_banded_measurements_are_windows() -> None:
    found = windows(_history())
    assert found == [
        Window("kill → DEAD (s)", 1004.0, 5.0, 2.0, 21.0),
        Window("late (s)", 1004.2, 30.0, 2.0, 21.0),
    ]
    assert [w.inside for w in found] == [True, False]


@pytest.mark.parametrize("rows", [1, 2, 3])
def test_placed_labels_never_share_a_row_where_they_overlap(rows: int) -> None:
    spans = [(0.0, 3.0), (1.0, 2.0), (2.5, 4.0), (3.5, 5.0), (6.0, 7.0), (0.5, 9.0)]
    placed = place(spans, rows)
    assert len(placed) == len(spans) and placed[0] == 0 and placed[4] == 0
    for (a, ra), (b, rb) in combinations(zip(spans, placed, strict=True), 2):
        if ra is not None and ra == rb:
            assert a[1] <= b[0] or b[1] <= a[0], (a, b)
    assert all(r is None or 0 <= r < rows for r in placed)


def test_the_picture_draws_bands_and_no_label_covers_another(tmp_path: Path) -> None:
    history = _history()
    fig = figure(history, names=NAMES, title="test_x[2.60.0]")
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        texts = [t for t in ax.texts if t.get_text()]
        labels = {t.get_text() for t in texts}
        assert "kill_node worker-1" in labels and "kill_raylet head:raylet" in labels
        assert "step ×3" in labels  # repeats merged
        assert "kill → DEAD (s): 5 s (expected 2.0–21.0 s)" in labels
        assert "late (s): 30 s (expected 2.0–21.0 s)" in labels
        boxes = [t.get_window_extent(renderer) for t in texts]
        for (a, box_a), (b, box_b) in combinations(zip(texts, boxes, strict=True), 2):
            assert not box_a.overlaps(box_b), (a.get_text(), b.get_text())
        # A window's label is inside the plot (the x limit makes room for it).
        right = ax.get_window_extent(renderer).x1
        for text, box in zip(texts, boxes, strict=True):
            if "expected" in text.get_text():
                assert box.x1 <= right, text.get_text()
        # The legend sits outside the axes: it covers no lane.
        legend = ax.get_legend().get_window_extent(renderer)
        assert legend.y1 <= ax.get_window_extent(renderer).y0
    finally:
        plt.close(fig)
    assert render(history, tmp_path / "t.png", names=NAMES).read_bytes()[:4] == b"\x89PNG"


def test_a_clients_requests_per_second_are_drawn_in_its_lane(tmp_path: Path) -> None:
    h = _history()
    for i in range(8):  # answered through two proxies; two seconds of failures during the kill
        failed = {"worker-1": 3 if i in (4, 5) else 0, "worker-2": 0}
        h.record("workload-2", "load_second", t=1001.0 + i, ok={"worker-1": 9, "worker-2": 10},
                 failed=failed)  # fmt: skip
    assert rate_series(h, "workload-2")[4][1:] == (19, 3)
    fig = figure(h, names=NAMES)
    try:
        texts = [t.get_text() for t in fig.axes[0].texts]
        assert "requests/s, peak 19" in texts
        assert not any(text.startswith("load_second") for text in texts), texts
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert "requests failed /s" in legend
    finally:
        plt.close(fig)
    assert render(h, tmp_path / "t.png", names=NAMES).stat().st_size > 0
