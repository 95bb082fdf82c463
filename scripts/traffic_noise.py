"""The memory-traffic model's run-to-run noise, which judge/gate.py's DRAM rule (g) must stay above
(``DRAM_NOISE_PERCENT``, ``DRAM_NOISE_LINES``).

Each kernel cell is traced N times through the X60's modelled caches (measure/traffic.py), each run into a fresh store,
so nothing is looked up by content. For each dispatch the script prints whether its bytes and accesses were identical
in every run, and the spread of its DRAM bytes in percent and in 64-byte lines.

    PYTHONPATH=. .venv/bin/python scripts/traffic_noise.py [SHAPES] [N]    (default: 64x64x64,256x256x256,81x41x19 6)
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

from pytest_rvv.base.store import Store
from pytest_rvv.config.kernels import kernels
from pytest_rvv.config.settings import Settings, default_cache_dir
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure.traffic import measure_traffic
from pytest_rvv.session import RvvSession

LINE = 64


def main(shapes: str = "64x64x64,256x256x256,81x41x19", runs: int = 6) -> None:
    with tempfile.TemporaryDirectory(prefix="traffic-noise-") as name:
        tmp = Path(name)
        session = RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(default_cache_dir())}, tmp))
        worst = (0.0, 0)
        for kernel in kernels({}, f"{shapes},f32", BUILTIN_TARGETS).cells:
            cell = session.cell(kernel.model, kernel.target, session.runner(kernel.target))
            traced = [measure_traffic(dataclasses.replace(cell, store=Store(tmp / f"{kernel.id}-{i}")), tmp / f"w{i}")
                      .as_json() for i in range(runs)]
            for dispatch in traced[0]["dispatches"]:
                rows = [t["dispatches"][dispatch] for t in traced]
                exact = all((r["loaded"], r["stored"], r["accesses"]) ==
                            (rows[0]["loaded"], rows[0]["stored"], rows[0]["accesses"]) for r in rows)
                dram = [r["dram_bytes"] for r in rows]
                percent, lines = 100 * (max(dram) - min(dram)) / max(min(dram), 1), (max(dram) - min(dram)) // LINE
                worst = (max(worst[0], percent), max(worst[1], lines))
                print(f"{kernel.id:<45} {dispatch[:48]:<48} bytes and accesses identical: {exact}; DRAM bytes "
                      f"{min(dram)}..{max(dram)}, spread {percent:.3f} % ({lines} lines)", flush=True)
        print(f"worst spread over {runs} runs each: {worst[0]:.3f} %, {worst[1]} lines")


if __name__ == "__main__":
    main(*sys.argv[1:2], *(int(n) for n in sys.argv[2:3]))
