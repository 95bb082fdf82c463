"""``pytest-rvv history``'s output: per cell a graph of its top dispatches' work over toolchain versions, the change
list, the drift lines and the gate's findings, as PNG files, ``index.html`` (no script, no CDN: any browser shows it
offline), ``changes.json`` for machines, and the lines the command prints. Formats only: the changes and the
findings come from comparison/history.py.
"""

from __future__ import annotations

import html
import json
import re
from itertools import groupby
from pathlib import Path
from typing import Any

from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.comparison.history import Cell, Change, Drift, Finding, History, lineage, percent_text
from pytest_rvv.measure.dispatch_table import DispatchRow

TOP = 5  # dispatches drawn per cell, most executed work first
SHOWN = 5  # change lines printed per version interval


def _file_name(cell: Cell) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{cell[0]}__{cell[1]}") + ".png"


def _work(row: DispatchRow | None) -> float:
    value = None if row is None else row.work
    return float("nan") if value is None else float(value)


def draw(history: History, cell: Cell, path: Path) -> Path:
    """One cell's graph: executed work of its top dispatches per version (step lines, evenly spaced versions, each
    change point marked and labelled with its move), and small panels of static instructions, vector share and
    spills."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = history.series(cell)
    names = [v.name for v, _ in series]
    x = list(range(len(names)))
    lines = lineage(history, cell)
    top = sorted(lines, key=lambda k: -max((_work(r) for r in lines[k] if r is not None), default=0))[:TOP]
    fig, axes = plt.subplots(4, 1, figsize=(10, 9), sharex=True, gridspec_kw={"height_ratios": [4, 1.2, 1.2, 1.2]})
    main = axes[0]
    rows = [r for k in top for r in lines[k] if r is not None]
    label = ("executed instructions per call" if rows and all(r.per_call is not None for r in rows) else
             "executed instructions (load and call)" if rows and all(r.executed is not None for r in rows) else
             "instructions (per call / counted run / static, as measured)")
    drawn_values = []
    for rank, name in enumerate(top):
        values = [_work(r) for r in lines[name]]
        drawn_values += [v for v in values if v == v and v > 0]
        # a label starting with "_" is left out of matplotlib's legend (IREE's _encoding_N dispatches): a zero-width
        # space in front keeps it
        (drawn,) = main.step(x, values, where="mid", label="\u200b" + name[:60], linewidth=1.6)
        previous = None
        for i, value in enumerate(values):
            if value != value:  # a gap (NaN): no change point across it
                continue
            if previous is not None and value != previous:
                main.plot([i], [value], marker="o", color=drawn.get_color(), markersize=6)
                main.annotate(percent_text(previous, value), (i, value), textcoords="offset points",
                              xytext=(5, 4 + 9 * rank), fontsize=7, color=drawn.get_color())
            previous = value
    if drawn_values and max(drawn_values) > 100 * min(drawn_values):
        main.set_yscale("log")  # dispatches orders of magnitude apart: each line readable
    gaps = [i for i, (_, t) in enumerate(series) if t is None]
    for i in gaps:
        main.axvspan(i - 0.5, i + 0.5, color="0.9", zorder=0)
    main.set_ylabel(label, fontsize=8)
    main.set_title(f"{cell[0]} on {cell[1]}: top {len(top)} dispatches by work" + (" (grey: no result)" if gaps
                                                                                   else ""), fontsize=10)
    main.legend(fontsize=7, loc="best")
    main.grid(alpha=0.3)
    tables = [t for _, t in series]
    static_spills = any(t is not None and t.total("spilled_registers") is not None for t in tables)
    panels = [("static instr.", [t.total("instructions") if t else None for t in tables]),
              ("vector %", [_share(t.total("executed_vector"), t.total("executed")) or
                            _share(t.total("vector"), t.total("instructions")) if t else None for t in tables]),
              ("vregs spilled" if static_spills else "vregs moved\nby spills",
               [(t.total("spilled_registers") if static_spills else t.total("executed_spills")) if t else None
                for t in tables])]
    for ax, (label, values) in zip(axes[1:], panels, strict=True):
        ax.step(x, [float("nan") if v is None else v for v in values], where="mid", color="0.3")
        if all(v is None for v in values):
            ax.text(0.5, 0.5, "not measured in this sweep", transform=ax.transAxes, ha="center", va="center",
                    fontsize=8, color="0.4")
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[-1].set_xticks(x, names, rotation=30, fontsize=8)
    axes[-1].set_xlim(-0.5, len(x) - 0.2)  # room for the last version's labels
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _share(part: int | None, whole: int | None) -> float | None:
    return round(100 * part / whole, 2) if part is not None and whole else None


def change_lines(changes: list[Change], shown: int = SHOWN) -> list[str]:
    """The change list grouped by version interval, most added executed work first, each group with its bisect line."""
    out = []
    for (good, bad), group in groupby(changes, key=lambda c: (c.good, c.bad)):
        items = list(group)
        cells = sorted({(c.model, c.target) for c in items})
        out.append(f"{good} -> {bad}: {len(items)} changes in {len(cells)} cells")
        for change in items[:shown]:
            out.append(f"  {change.model} on {change.target}: {change.text()}")
        if len(items) > shown:
            out.append(f"  ... and {len(items) - shown} more (changes.json)")
        first = items[0]
        out.append(f"  bisect: {first.bisect_line()}")
    return out


def write(history: History, changes: list[Change], drifts: list[Drift], findings: list[Finding], out: Path) -> Path:
    """Graphs, index.html and changes.json into ``out``; returns index.html."""
    out.mkdir(parents=True, exist_ok=True)
    graphs = {cell: draw(history, cell, out / _file_name(cell)) for cell in history.cells}
    document: dict[str, Any] = {
        "versions": [{"name": v.name, "compiler": v.compiler, **v.identity} for v in history.versions],
        "changes": [c.to_json() for c in changes],
        "drift": [{"model": d.model, "target": d.target, "first": d.first, "last": d.last, "before": d.before,
                   "after": d.after, "percent": round(d.percent, 2)} for d in drifts],
        "findings": [{"model": f.model, "target": f.target, "good": f.good, "bad": f.bad, "line": f.line,
                      "regression": f.regression, "drift": f.drift} for f in findings],
        "gaps": {f"{m} on {t}": why for (m, t), why in sorted(history.gaps.items())},
        "notes": history.notes,
    }
    atomic_write_bytes(out / "changes.json", (json.dumps(document, indent=1) + "\n").encode())
    e = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>pytest-rvv history</title>",
             "<style>body{font:14px sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left}"
             "table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}</style>",
             "<h1>Dispatches over toolchain versions</h1>", "<h2>Versions</h2><table><tr><th>version</th>"
             "<th>compiler</th><th>runtime</th><th>QEMU</th><th>llvm-mca</th></tr>"]
    parts += [f"<tr><td>{e(v.name)}</td><td>{e(v.compiler)}</td><td>{e(v.identity.get('runtime', ''))}</td>"
              f"<td>{e(v.identity.get('qemu', ''))}</td><td>{e(v.identity.get('llvm_mca', ''))}</td></tr>"
              for v in history.versions]
    parts.append("</table>")
    if findings:
        parts.append("<h2>The gate</h2><ul>" + "".join(
            f"<li>{'<b>REGRESSED</b> ' if f.regression else 'improved '}{e(f.text())}</li>" for f in findings)
            + "</ul>")
    parts.append("<h2>Drift, first to last</h2><ul>" + "".join(f"<li>{e(d.text())}</li>" for d in drifts) + "</ul>")
    parts.append("<h2>Change points</h2><pre>" + e("\n".join(change_lines(changes, shown=20))) + "</pre>")
    for cell, graph in graphs.items():
        parts.append(f"<h3>{e(cell[0])} on {e(cell[1])}</h3><img src='{e(graph.name)}' alt='{e(graph.name)}'>")
    if history.notes:
        parts.append("<h2>Left out</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in history.notes) + "</ul>")
    page = out / "index.html"
    atomic_write_bytes(page, "\n".join(parts).encode())
    return page
