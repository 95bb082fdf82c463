"""Where every emulated run is kept by content: IREE's plain and counted runs (run/recorded.py), the traced runs
(measure/plugin_run.py: memory traffic, work per thread) and the peers' runs (run/peer.py) all ask one ``KeptRuns``.

Normally a run is looked up in the store and emulated only when its content is new. With ``fresh`` (``--rvv-no-cache``)
nothing is looked up and nothing new is kept: each content is emulated once per session, into a folder that lives as
long as this object (the tests of a cell that ask for the same run share it, as they would share the store's entry).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_rvv.base.store import Entry, Store


class KeptRuns:
    """Runs by content: from ``store``, or, ``fresh``, emulated again once per content in this session."""

    def __init__(self, store: Store, fresh: bool = False) -> None:
        self.store, self.fresh = store, fresh
        self._kept: tempfile.TemporaryDirectory[str] | None = None  # fresh runs' folders; removed with this object
        self._fresh: dict[tuple[str, str], Entry] = {}

    def has(self, namespace: str, key: str) -> bool:
        """Whether the run of ``key`` is kept (in the store, verified; or, fresh, made by this session)."""
        return (namespace, key) in self._fresh if self.fresh else self.store.lookup(namespace, key) is not None

    def get_or_build(self, namespace: str, key: str, build: Callable[[Path], dict[str, Any]]) -> Entry:
        """The entry of ``key`` (``build(folder) -> meta`` emulates it); ``created`` is True for a run made by this
        session (a fresh run always), False for one read from the store. Nothing is kept when ``build`` raises."""
        if not self.fresh:
            return self.store.get_or_build(namespace, key, build)
        found = self._fresh.get((namespace, key))
        if found is None:
            if self._kept is None:
                self._kept = tempfile.TemporaryDirectory(prefix="pytest-rvv-fresh-")
            into = Path(tempfile.mkdtemp(prefix=f"{namespace}-", dir=self._kept.name))
            found = self._fresh[(namespace, key)] = Entry(into, key, build(into), created=True)
        return found
