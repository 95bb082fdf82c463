"""Verdicts on a cell's peer (suites/peers/, suites/kernels/): a cell the peer refuses, and a change in its work.

A peer (run/peer.py PEERS: ONNX Runtime's riscv64 build, OpenBLAS) is a fixed point: its work per call on a model
and target is recorded as a snapshot (``__snapshots__/test_peers/...json``, ``test_kernels/...-openblas].json``) and
a run whose work differs fails, naming what changed (a new Debian package, QEMU, the harness). A model the peer
refuses (an operator it lacks, a model it rejects: the peer said why) is an expected failure with that one line: a
fact about the peer, not a defect here, and the IREE side, tested elsewhere, is unaffected. A crash of the harness
under QEMU is not: it fails.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syrupy.assertion import SnapshotAssertion

from pytest_rvv.judge.outcome import Verdict, failed, passed, xfailed
from pytest_rvv.measure.peers import IreeCall, PeerCall, PeerRow, ordered


def peer_refused(message: str) -> Verdict:
    """The peer refused the model (``PeerRejected``'s one line): an expected failure with that line."""
    return xfailed(message)


def check_peer_work(snapshot: SnapshotAssertion, current: dict[str, Any], model: str, target: str,
                    strict: bool = False, own: str = "") -> Verdict:
    """The peer's work per call (``PeerWork.snapshot``) against its recorded snapshot: a difference fails; none
    recorded yet passes with a note (fails with ``strict``); ``--snapshot-update`` records it.

    With ``own`` (the file-name prefix of the peer's own libraries, ``libggml``) only their work is judged: a change
    elsewhere (libc from a newer Debian package on a fresh fetch, the vDSO) passes with a note naming it, since it is
    not the peer's code and a new machine's fetch must not fail a suite nothing changed in."""
    where = Path(snapshot.extension.get_location(test_location=snapshot.test_location, index=snapshot.index))
    try:
        previous = json.loads(where.read_text())
    except FileNotFoundError:
        previous = None
    except (OSError, ValueError) as exc:
        return failed(f"{where}: unreadable snapshot ({exc}); restore it from git")
    if snapshot.update_snapshots:
        assert snapshot == current
        return passed()
    if previous is None:
        note = f"no snapshot of the peer's work recorded yet ({where.name}): --snapshot-update records it"
        return failed(note) if strict else passed(notes=[note])
    # keep the recorded snapshot in use (syrupy reports unused ones), through a copy that may not write; the verdict
    # is the comparison below
    reader = dataclasses.replace(snapshot, update_snapshots=False, update_new_snapshots_only=False)
    reader == previous  # noqa: B015
    if previous == current:
        return passed()
    before, now = previous.get("per_call_instructions"), current["per_call_instructions"]
    libraries = sorted({*previous.get("libraries", {}), *current["libraries"]})
    moved = [f"{name} {previous.get('libraries', {}).get(name, 0):,} -> {current['libraries'].get(name, 0):,}"
             for name in libraries
             if previous.get("libraries", {}).get(name, 0) != current["libraries"].get(name, 0)]
    if own and not any(m.startswith(own) for m in moved):
        return passed(notes=[f"{current['peer']}'s own code ({own}*) does the same work per call on {model} at "
                             f"{target}; outside it: {'; '.join(moved) or 'its description changed'} "
                             "(--snapshot-update records it)"])
    return failed(f"{current['peer']}'s work per call on {model} at {target} changed: {before:,} -> {now:,} "
                  f"instructions ({'; '.join(moved) or 'its description changed'})\nsnapshot: {where}\n"
                  "if the peer changed on purpose (a new package, QEMU), rerun with --snapshot-update")


NEAR = 1.2  # IREE's best path "within 1.2x of the fastest peer"


@dataclass(frozen=True)
class PeerGap:
    """Per model: IREE's best row (its fastest target by est. X60 ms, by work per call where there is no estimate)
    beside the fastest peer row, and IREE / peer (results.json's ``peers_gap``, ``to_json``)."""

    model: str
    iree_target: str
    iree_est_ms: float | None
    iree_per_call_instructions: int
    peer_name: str
    peer_title: str
    peer_target: str
    peer_est_ms: float | None
    peer_per_call_instructions: int
    est_ratio: float | None
    work_ratio: float | None

    @property
    def ratio(self) -> float | None:
        """IREE / the fastest peer: by est. X60 ms where both sides have it, else by work per call."""
        return self.est_ratio if self.est_ratio is not None else self.work_ratio

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _speed(side: IreeCall | PeerCall) -> tuple[float, float]:
    """How a side ranks: est. X60 ms first (what silicon would take), work per call when there is no estimate."""
    return (float("inf") if side.est_ms is None else float(side.est_ms), float(side.per_call))


def gaps(rows: list[PeerRow]) -> list[PeerGap]:
    """Per model: IREE's best path beside the fastest peer on the same core.

    Every target of a model runs on the same modelled core (the X60 has RVV 1.0 at VLEN 256), so the best of IREE's
    paths (rv64gc, RVV, mmt4d...) is held against the best any peer does on that core."""
    entries = []
    for model in sorted({r.model for r in rows}):
        mine = [r for r in ordered(rows) if r.model == model]
        best = min(mine, key=lambda r: _speed(r.iree))
        fastest = min(mine, key=lambda r: _speed(r.work))
        iree, peer = best.iree, fastest.work
        est = iree.est_ms / peer.est_ms if iree.est_ms is not None and peer.est_ms else None
        work = iree.per_call / peer.per_call if peer.per_call else None
        entries.append(PeerGap(model, best.target, iree.est_ms, iree.per_call, fastest.name, fastest.title,
                               fastest.target, peer.est_ms, peer.per_call, None if est is None else round(est, 4),
                               None if work is None else round(work, 4)))
    return entries


@dataclass(frozen=True)
class PeerStanding:
    """Where IREE stands beside the fastest peer over a run's models (from ``gaps``): on how many its best path is
    within ``NEAR``, and the model furthest behind (or, when it leads everywhere, the closest), by est. ms where both
    sides have it, else by work per call."""

    near: int
    models: int
    ratio: float
    entry: PeerGap

    @property
    def behind(self) -> bool:
        return self.ratio > 1

    @property
    def by_estimate(self) -> bool:
        return self.entry.est_ratio is not None


def peer_standing(entries: list[PeerGap]) -> PeerStanding | None:
    """IREE / the fastest peer per model, judged: None when no model has a ratio."""
    ratios = [(x, e) for e in entries if (x := e.ratio) is not None]
    if not ratios:
        return None
    ratio, entry = max(ratios, key=lambda pair: pair[0])
    return PeerStanding(sum(1 for x, _ in ratios if x <= NEAR), len(ratios), ratio, entry)
