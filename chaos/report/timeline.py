"""A picture of the history: one lane per node, fault windows shaded, workload events marked,
and every measured window drawn against the band it was held to.

Readable by someone who did not run the test: time in seconds from the first event on x,
node state as coloured bars (green ALIVE, red DEAD), faults as shaded spans named at the top,
spans where the State API was unreachable hatched grey, workload events as labelled ticks
(repeats of one event merged: "step ×3"), a client's requests per second in a lane of their
own when it reports them (``load_second`` events: answered in green, failed in red, summed
over its targets), and, in the bottom lane, each window an experiment
measured against a band (``experiment.measure(name, value, band=…)``): the expected band as a
bar from the strike, the measured value as a diamond (green inside the band, red outside).
Labels never overlap: each goes to the first free row of its lane, measured in the picture's
own font; a label with no free row is left out (its tick stays), the legend sits below the plot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.check.stalls import STALLED_FRACTION, STRETCH_S, stall_steps
from chaos.cluster.stalls import PERIOD_S
from chaos.history import Event, History, Kind

if TYPE_CHECKING:
    from chaos.experiment import Experiment

_STATE_COLOURS = {"ALIVE": "#2e9e4f", "DEAD": "#c62828"}
#: A client's per-second report (``{"ok": {target: n}, "failed": {target: n}}``): drawn as
#: requests per second in its lane, never as ticks.
RATE_KIND = "load_second"
_SKIP_KINDS = {
    "exec_ended", "observer_started", "node_state", "actor_state", "pg_state", RATE_KIND,
}  # fmt: skip
_OK = "#2e9e4f"
_FAULT = "#e65100"
_BAND = "#7cb342"
_EVENT = "#1565c0"
_ERROR = "#c62828"
#: Workload events merged into one label when the same kind repeats within this many seconds.
_MERGE_S = 2.0
#: Rows of labels a workload lane has above its ticks; fault labels may take more.
_EVENT_ROWS = 4
_FAULT_ROWS = 4
_FONT = 7
_WORKERS_LANE = "autoscaled workers"
_STALL_LANE = "host: CPU stall"


@dataclass(frozen=True)
class Window:
    """A measured window and the band it was held to (seconds from ``start``)."""

    name: str
    start: float
    value: float
    low: float
    high: float

    @property
    def inside(self) -> bool:
        return self.low <= self.value <= self.high


def windows(history: History) -> list[Window]:
    """The banded measurements of ``history`` (``experiment.measure(…, band=…)``)."""
    found = []
    for event in history.events(Kind.MEASUREMENT):
        band, start, value = event.get("band"), event.get("start"), event.get("value")
        if not (isinstance(band, list | tuple) and len(band) == 2 and start is not None):
            continue
        try:
            low, high = float(band[0]), float(band[1])
            found.append(Window(str(event.get("name")), float(start), float(value), low, high))
        except (TypeError, ValueError):  # a value that is not a number: nothing to draw
            continue
    return found


def place(spans: Sequence[tuple[float, float]], rows: int, gap: float = 0.0) -> list[int | None]:
    """Rows for labels spanning ``spans`` (x from, x to; in drawing order) so that no two in
    one row overlap: each takes the lowest row free at its start; None when all ``rows`` are
    taken there (the label is left out)."""
    ends: list[float] = []
    chosen: list[int | None] = []
    for start, stop in spans:
        row = next((r for r, end in enumerate(ends) if end + gap <= start), None)
        if row is None and len(ends) < rows:
            ends.append(float("-inf"))
            row = len(ends) - 1
        if row is not None:
            ends[row] = max(ends[row], stop)
        chosen.append(row)
    return chosen


def _span(x: float, width: float, xmax: float) -> tuple[float, float]:
    """A label's extent: right of ``x``, or left of it where it would leave the plot."""
    return (x, x + width) if x + width <= xmax else (x - width, x)


def _merged(events: Sequence[Event]) -> list[tuple[float, str, bool]]:
    """(t, label, is_error) per run of one event kind within :data:`_MERGE_S`."""
    out: list[tuple[float, str, bool, int, float]] = []
    for e in events:
        error = e.kind in {"error", "harness_error"}
        if out and out[-1][1] == e.kind and e.t - out[-1][4] <= _MERGE_S:
            t, kind, err, n, _ = out[-1]
            out[-1] = (t, kind, err or error, n + 1, e.t)
        else:
            out.append((e.t, e.kind, error, 1, e.t))
    return [(t, kind if n == 1 else f"{kind} ×{n}", err) for t, kind, err, n, _ in out]


class _Canvas:
    """Text measured in data units on one axes (labels placed without overlap)."""

    def __init__(self, fig: Any, ax: Any) -> None:
        self.fig, self.ax = fig, ax
        self.renderer = fig.canvas.get_renderer()

    def size(self, text: str, fontsize: float = _FONT) -> tuple[float, float]:
        probe = self.ax.text(0, 0, text, fontsize=fontsize)
        box = probe.get_window_extent(self.renderer)
        probe.remove()
        inverse = self.ax.transData.inverted()
        (x0, y0), (x1, y1) = inverse.transform([(box.x0, box.y0), (box.x1, box.y1)])
        return abs(x1 - x0), abs(y1 - y0)


def write_evidence(kit: Experiment, directory: Path, test_id: str) -> tuple[Path, Path | None]:
    """The kit's history JSON and, beside it, its timeline picture (None: nothing to draw)."""
    history = kit.write_history(directory, test_id)
    stem = history.name.removesuffix(".history.json")
    try:
        picture = render(
            kit.history,
            history.with_name(f"{stem}.timeline.png"),
            names={n.ip: n.name for n in [*kit.cluster.ray_nodes(), *kit.cluster.retired.values()]},
            title=test_id,
        )
    except ValueError:
        return history, None
    return history, picture


def render(history: History, path: Path, *, names: Mapping[str, str], title: str = "") -> Path:
    """Draw ``history`` to ``path`` (PNG). ``names`` maps node IPs to node names."""
    import matplotlib.pyplot as plt

    fig = figure(history, names=names, title=title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def figure(history: History, *, names: Mapping[str, str], title: str = "") -> Any:
    """The picture of ``history`` as a matplotlib figure (close it with ``plt.close``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    events = history.events()
    if not events:
        raise ValueError("empty history: nothing to draw")
    t0 = events[0].t
    banded = windows(history)
    end = max([events[-1].t - t0, *(w.start - t0 + max(w.high, w.value) for w in banded)]) + 0.5
    lanes = list(dict.fromkeys(names.values()))
    workload_sources = sorted({e.source for e in events if e.source.startswith("workload")})
    # Lane heights (data units): a node lane 1, a workload lane room for its label rows, the
    # measured-windows lane one row per window. y grows upwards: the first lane on top.
    heights = [1.0] * len(lanes) + [2.0] * len(workload_sources)
    rows = [*lanes, *workload_sources]
    # A client's requests per second get a lane of their own, under the workload lanes.
    rate_lanes = {s: f"{s} requests/s" for s in workload_sources if rate_series(history, s)}
    rate_names = set(rate_lanes.values())
    rows += list(rate_lanes.values())
    heights += [1.5] * len(rate_lanes)
    scaled = bool(worker_series(history)[0])
    if scaled:
        rows.append(_WORKERS_LANE)
        heights.append(1.5)
    stalled = stall_steps(history.events(Kind.CPU_STALL))
    if stalled:
        rows.append(_STALL_LANE)
        heights.append(1.5)
    if banded:
        rows.append("measured windows")
        heights.append(0.4 + 0.5 * len(banded))
    y: dict[str, float] = {}
    top = 0.0
    for name, height in zip(reversed(rows), reversed(heights), strict=True):
        lined = name in rate_names or name in (_WORKERS_LANE, _STALL_LANE)
        y[name] = top + (0.5 if height == 1.0 else 0.75 if lined else 0.3)
        top += height
    if banded:  # the lane's name in the middle of its rows
        y["measured windows"] += 0.25 * (len(banded) - 1)
    fault_base = top + 0.2
    fig_height = 1.6 + 0.45 * (top + 0.7)
    fig, ax = plt.subplots(figsize=(12, fig_height))
    ax.set_xlim(0, end)
    ax.set_ylim(0, fault_base + 0.7)
    ax.set_yticks([y[r] for r in rows], rows)
    ax.set_xlabel("seconds since the first event")
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    # The axes' final size before any text is measured (labels are placed in data units).
    fig.tight_layout()
    canvas = _Canvas(fig, ax)
    if banded:  # room on the right for each window's label, before anything is placed
        ax.set_xlim(0, _room(canvas, banded, t0, end))

    # Node state bars, per IP (a restarted node keeps its IP under a new node id).
    current: dict[str, tuple[float, str]] = {}
    newest_id: dict[str, str] = {}
    for event in history.events("node_state", source="observer"):
        ip = str(event.get("node_ip"))
        if ip not in names:
            continue
        # A restarted node has a new id on the same IP: once it appears, the lane follows it.
        node_id = str(event.get("node_id"))
        if ip in newest_id and node_id != newest_id[ip] and event.get("state") == "DEAD":
            continue
        newest_id[ip] = node_id
        if ip in current:
            start, state = current[ip]
            _bar(ax, y[names[ip]], start, event.t - t0, state)
        current[ip] = (event.t - t0, str(event.get("state")))
    for ip, (start, state) in current.items():
        _bar(ax, y[names[ip]], start, end, state)

    # Fault labels first: the rows they take set the top of the plot, and text heights
    # below are measured on the final scale.
    fault_rows = _faults(ax, canvas, history, t0, end, fault_base)
    ax.set_ylim(0, fault_base + 0.35 * max(fault_rows, 1) + 0.2)
    _unobservable(ax, history, t0, end)
    for source, lane in rate_lanes.items():
        _rates(ax, history, source, t0, y[lane] - 0.6, 1.2)
    if scaled:
        _workers(ax, history, t0, end, y[_WORKERS_LANE] - 0.6, 1.2)
    if stalled:
        beats = sorted({e.t for e in history.events(Kind.CPU_STALL)})
        _stalls(ax, stalled, beats, t0, y[_STALL_LANE] - 0.6, 1.2)
    for source in workload_sources:
        marks = _merged([e for e in history.events(source=source) if e.kind not in _SKIP_KINDS])
        _ticks(ax, canvas, marks, t0, y[source])
    if banded:
        _windows(ax, canvas, banded, t0, y["measured windows"] - 0.25 * (len(banded) - 1))

    legend: list[Any] = [Rectangle((0, 0), 1, 1, color=c) for c in _STATE_COLOURS.values()]
    legend += [
        Rectangle((0, 0), 1, 1, color="#ff9800", alpha=0.3),
        Rectangle((0, 0), 1, 1, facecolor="none", edgecolor="grey", hatch="//"),
    ]
    labels = ["node ALIVE", "node DEAD", "fault active", "State API unreachable"]
    if rate_lanes:
        legend += [Line2D([], [], color=_OK), Line2D([], [], color=_ERROR)]
        labels += ["requests answered /s", "requests failed /s"]
    if banded:
        legend += [
            Rectangle((0, 0), 1, 1, color=_BAND, alpha=0.35),
            Line2D([], [], marker="D", color="#2e7d32", linestyle="none"),
            Line2D([], [], marker="D", color=_ERROR, linestyle="none"),
        ]
        labels += ["expected band", "measured, inside", "measured, outside"]
    # Below the x axis label, outside the plot: it covers no lane.
    below = 0.45 / (ax.get_position().height * fig_height)
    ax.legend(
        legend,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, -below),
        fontsize=_FONT,
        ncol=len(labels),
        frameon=False,
    )
    return fig


def _faults(ax: Any, canvas: _Canvas, history: History, t0: float, end: float, base: float) -> int:
    """Fault windows: inject → heal (or to the end for faults nothing undoes), named on top;
    returns the rows of names used."""
    heals = history.events("heal", source="nemesis")
    labels: list[tuple[float, str]] = []
    for inject in history.events("inject", source="nemesis"):
        heal = next(
            (
                h
                for h in heals
                if h.t >= inject.t
                and h.get("fault") == inject.get("fault")
                and h.get("target") == inject.get("target")
            ),
            None,
        )
        stop = heal.t - t0 if heal and not heal.get("permanent") else end
        ax.axvspan(inject.t - t0, stop, color="#ff9800", alpha=0.18, zorder=0)
        ax.axvline(inject.t - t0, color=_FAULT, linewidth=1.2, zorder=1)
        labels.append((inject.t - t0, f"{inject.get('fault')} {inject.get('target')}"))
    widths = [canvas.size(text, 8)[0] for _, text in labels]
    gap = canvas.size("m", 8)[0]
    spans = [_span(x, w, end) for (x, _), w in zip(labels, widths, strict=True)]
    rows = place(spans, _FAULT_ROWS, gap)
    for (x, text), (left, _), row in zip(labels, spans, rows, strict=True):
        if row is not None:
            ha = "left" if left == x else "right"
            ax.text(x, base + 0.35 * row, text, fontsize=8, color=_FAULT, va="bottom", ha=ha)
    return max((r + 1 for r in rows if r is not None), default=0)


def rate_series(history: History, source: str) -> list[tuple[float, int, int]]:
    """A client's requests per second: (time, answered, failed), summed over its targets."""
    series = []
    for event in history.events(RATE_KIND, source=source):
        ok, failed = event.get("ok"), event.get("failed")
        if isinstance(ok, Mapping) and isinstance(failed, Mapping):
            series.append((event.t, sum(map(int, ok.values())), sum(map(int, failed.values()))))
    return series


def _rates(ax: Any, history: History, source: str, t0: float, base: float, height: float) -> None:
    """Requests per second of ``source`` as two step lines scaled into its lane; the peak is
    written at the lane's left."""
    series = rate_series(history, source)
    peak = max(max(ok, failed) for _, ok, failed in series) or 1
    xs = [t - t0 for t, _, _ in series]
    for index, colour in ((1, _OK), (2, _ERROR)):
        ys = [base + height * row[index] / peak for row in series]
        ax.step(xs, ys, where="pre", color=colour, linewidth=1.0, alpha=0.9)
    ax.text(
        xs[0], base + height, f"requests/s, peak {peak}", fontsize=_FONT, color="#555555",
        va="top",
    )  # fmt: skip


def worker_series(
    history: History,
) -> tuple[list[tuple[float, int]], list[tuple[float, int]], int | None]:
    """An autoscaling cluster's workers: (time, wanted by the provider), (time, present as
    containers), and the cluster's ``max_workers`` (None: not an autoscaling history)."""
    wanted = [(e.t, len(e.get("nodes") or {})) for e in history.events("autoscaler_wants")]
    present = [
        (e.t, sum(dict(e.get("workers") or {}).values()))
        for e in history.events()
        if e.kind in ("autoscaler_launched", "autoscaler_removed")
    ]
    caps = history.events("autoscaler_bridge_started")
    cap = int(caps[-1].get("max_workers")) if caps else None
    return wanted, present, cap


def _stalls(
    ax: Any,
    lane: Sequence[tuple[float, float]],
    beats: Sequence[float],
    t0: float,
    base: float,
    height: float,
) -> None:
    """The most stalled node's share of each second spent waiting for a CPU (0 to 1), under
    the share that makes a judged window inconclusive (dotted, over a 5 s stretch); shaded
    where the sampler itself went silent for more than two periods (the harness starved)."""
    xs = [t - t0 for t, _ in lane]
    ys = [base + height * share for _, share in lane]
    ax.step(xs, ys, where="pre", color=_ERROR, linewidth=1.0, alpha=0.9)
    for a, b in pairwise(beats):
        if b - a > 2 * PERIOD_S:
            ax.fill_between([a - t0, b - t0], base, base + height, color="grey", alpha=0.25)
    ax.axhline(base + height * STALLED_FRACTION, color="#555555", linestyle=":", linewidth=0.8)
    label = (
        f"CPU stall, worst node (0-100 % of each second); inconclusive above "
        f"{STALLED_FRACTION:.0%} over {STRETCH_S:.0f} s (dotted)"
    )
    ax.text(xs[0], base + height, label, fontsize=_FONT, color="#555555", va="bottom")


def _workers(ax: Any, history: History, t0: float, end: float, base: float, height: float) -> None:
    """Workers the autoscaler wanted and the containers present, as step lines, under the
    cluster's cap (dotted)."""
    wanted, present, cap = worker_series(history)
    # One step of head-room above the highest line, so the cap never hides under the label.
    peak = max([n for _, n in wanted + present] + [cap or 0, 1]) + 1
    start = wanted[0][0] - t0
    for series, colour, style in ((wanted, _EVENT, "--"), (present, _OK, "-")):
        points = [(start, 0), *((t - t0, n) for t, n in series), (end, None)]
        xs = [x for x, _ in points]
        values: list[int] = []
        for _, n in points:
            values.append(values[-1] if n is None else n)
        ys = [base + height * v / peak for v in values]
        ax.step(xs, ys, where="post", color=colour, linestyle=style, linewidth=1.2)
    if cap is not None:
        ax.axhline(base + height * cap / peak, color=_ERROR, linestyle=":", linewidth=0.8)
    label = f"workers: present (green), wanted (blue, dashed); cap {cap} (red, dotted)"
    ax.text(start, base + height, label, fontsize=_FONT, color="#555555", va="bottom")


def _unobservable(ax: Any, history: History, t0: float, end: float) -> None:
    """Spans where the State API could not be read (GCS or head down), hatched."""
    down = None
    for event in history.events(source="observer"):
        if event.kind == "unobservable" and down is None:
            down = event.t - t0
        elif event.kind == "observable" and down is not None:
            ax.axvspan(
                down, event.t - t0, facecolor="none", edgecolor="grey", hatch="//", linewidth=0
            )
            down = None
    if down is not None:
        ax.axvspan(down, end, facecolor="none", edgecolor="grey", hatch="//", linewidth=0)


def _ticks(
    ax: Any, canvas: _Canvas, marks: Sequence[tuple[float, str, bool]], t0: float, lane: float
) -> None:
    """A workload's events: a tick each, labels in rows above it, none over another."""
    width_of = [canvas.size(label)[0] for _, label, _ in marks]
    height = canvas.size("Ag")[1] * 1.15
    gap = canvas.size("m")[0] * 0.6
    xmax = ax.get_xlim()[1]
    spans = [_span(t - t0, w, xmax) for (t, _, _), w in zip(marks, width_of, strict=True)]
    rows = place(spans, _EVENT_ROWS, gap)
    for (t, label, error), (left, _), row in zip(marks, spans, rows, strict=True):
        colour = _ERROR if error else _EVENT
        ax.plot(t - t0, lane, marker="|", markersize=12, color=colour)
        if row is not None:
            ha = "left" if left == t - t0 else "right"
            y = lane + 0.22 + height * row
            ax.text(t - t0, y, label, fontsize=_FONT, color=colour, ha=ha)


def _label(window: Window) -> str:
    return f"{window.name}: {window.value:g} s (expected {window.low:.1f}–{window.high:.1f} s)"


def _room(canvas: _Canvas, found: Sequence[Window], t0: float, end: float) -> float:
    """The x limit that fits every window's label right of its window (text keeps its size in
    inches, so its width in seconds grows with the limit)."""
    limit = end
    pad = canvas.size("m")[0]
    for window in found:
        right = window.start - t0 + max(window.high, window.value) + pad
        # Of the axes' width, with room for the text growing a little at the saved dpi.
        share = 1.1 * (canvas.size(_label(window))[0] + pad) / end
        limit = max(limit, right / (1 - share) if share < 0.8 else right * 5)
    return limit


def _windows(ax: Any, canvas: _Canvas, found: Sequence[Window], t0: float, lane: float) -> None:
    """Each measured window on its own row: the band from the strike, the value as a diamond."""
    for index, window in enumerate(found):
        row = lane + 0.5 * (len(found) - 1 - index)
        start = window.start - t0
        ax.broken_barh(
            [(start + window.low, max(window.high - window.low, 0.05))],
            (row - 0.14, 0.28),
            facecolors=_BAND,
            alpha=0.35,
        )
        ax.plot([start, start + window.low], [row, row], color=_BAND, linewidth=0.8, linestyle=":")
        colour = "#2e7d32" if window.inside else _ERROR
        ax.plot(start + window.value, row, marker="D", markersize=5, color=colour, zorder=3)
        text = _label(window)
        # Right of the window: the x limit leaves room for it (see _room).
        right = start + max(window.high, window.value) + canvas.size("m")[0]
        ax.text(right, row, text, fontsize=_FONT, va="center", color=colour)


def _bar(ax: Any, y: float, start: float, stop: float, state: str) -> None:
    colour = _STATE_COLOURS.get(state, "#9e9e9e")
    ax.broken_barh(
        [(start, max(stop - start, 0.05))], (y - 0.3, 0.6), facecolors=colour, alpha=0.85
    )
