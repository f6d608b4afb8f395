"""A picture of the history: one lane per node, fault windows shaded, workload events marked.

Readable by someone who did not run the test: time in seconds from the first event on x,
node state as coloured bars (green ALIVE, red DEAD), faults as shaded spans named at the top,
spans where the State API was unreachable hatched grey, workload events as labelled ticks.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaos.observer.history import History

_STATE_COLOURS = {"ALIVE": "#2e9e4f", "DEAD": "#c62828"}
_SKIP_KINDS = {"exec_ended", "observer_started", "node_state", "actor_state", "pg_state"}


def render(history: History, path: Path, *, names: Mapping[str, str], title: str = "") -> Path:
    """Draw ``history`` to ``path`` (PNG). ``names`` maps node IPs to node names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    events = history.events()
    if not events:
        raise ValueError("empty history: nothing to draw")
    t0 = events[0].t
    end = events[-1].t - t0 + 0.5
    lanes = sorted(set(names.values()), key=list(names.values()).index)
    workload_sources = sorted({e.source for e in events if e.source.startswith("workload")})
    rows = [*lanes, *workload_sources]
    y = {name: len(rows) - i for i, name in enumerate(rows)}

    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.55 * len(rows)))
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

    # Fault windows: inject → heal (or to the end for faults nothing undoes).
    heals = history.events("heal", source="nemesis")
    for index, inject in enumerate(history.events("inject", source="nemesis")):
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
        ax.axvline(inject.t - t0, color="#e65100", linewidth=1.2, zorder=1)
        ax.text(
            inject.t - t0,
            len(rows) + 0.65 + 0.35 * (index % 2),
            f"{inject.get('fault')} {inject.get('target')}",
            fontsize=8,
            color="#e65100",
        )

    # The State API could not be read (GCS or head down).
    down = None
    for event in history.events(source="observer"):
        if event.kind == "unobservable" and down is None:
            down = event.t - t0
        elif event.kind == "observable" and down is not None:
            ax.axvspan(
                down,
                event.t - t0,
                facecolor="none",
                edgecolor="grey",
                hatch="//",
                linewidth=0,
                zorder=0,
            )
            down = None
    if down is not None:
        ax.axvspan(down, end, facecolor="none", edgecolor="grey", hatch="//", linewidth=0)

    for source in workload_sources:
        marks = [e for e in history.events(source=source) if e.kind not in _SKIP_KINDS]
        for index, event in enumerate(marks[:60]):
            colour = "#c62828" if event.kind in {"error", "harness_error"} else "#1565c0"
            ax.plot(event.t - t0, y[source], marker="|", markersize=14, color=colour)
            ax.text(
                event.t - t0,
                y[source] + 0.18 + 0.16 * (index % 2),
                event.kind,
                fontsize=7,
                rotation=0,
                color=colour,
            )

    ax.set_yticks([y[r] for r in rows], rows)
    ax.set_ylim(0.4, len(rows) + 1.3)
    ax.set_xlim(0, end)
    ax.set_xlabel("seconds since the first event")
    ax.grid(axis="x", alpha=0.3)
    legend = [Rectangle((0, 0), 1, 1, color=c) for c in _STATE_COLOURS.values()]
    legend += [
        Rectangle((0, 0), 1, 1, color="#ff9800", alpha=0.3),
        Rectangle((0, 0), 1, 1, facecolor="none", edgecolor="grey", hatch="//"),
    ]
    ax.legend(
        legend,
        ["node ALIVE", "node DEAD", "fault active", "State API unreachable"],
        loc="lower right",
        fontsize=7,
        ncol=4,
    )
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _bar(ax: Any, y: float, start: float, stop: float, state: str) -> None:
    colour = _STATE_COLOURS.get(state, "#9e9e9e")
    ax.broken_barh(
        [(start, max(stop - start, 0.05))], (y - 0.3, 0.6), facecolors=colour, alpha=0.85
    )
