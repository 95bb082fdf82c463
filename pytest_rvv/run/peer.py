"""The peer runner: ONNX Runtime's own riscv64 build running a cell's prepared model under the same QEMU.

A ``PeerRunner`` runs the ONNX Runtime harness (run/ort_harness.py) on a riscv64 target with that target's QEMU CPU
(the same CPU string and VLEN pairing as the IREE cell), in the verified sysroot (toolchain/peer_ort.py). Its runs
are deterministic (one thread, an empty environment, QEMU's reserved address space) and kept in the store by content
like IREE's emulated runs (run/recorded.py): the harness, the sysroot's marker, the model's bytes, the inputs, QEMU and
its CPU, the helper (the RSS probe or the counting plugin) and the kind of run:

- ``plain``: one call with the RSS probe around the emulator (outputs, peak RSS);
- ``counted-1`` / ``counted-2``: one and two calls in one session with the counting plugin and the guest's maps
  (what executed, and in which library): their difference is one call's work, session creation excluded;
- ``traced-0`` / ``traced-1``: no call and one call (the matmul harnesses' ``--repeat=0``) with the memory-trace
  plugin through a core's modelled caches: their difference is one call's traffic (measure/peer_threads.py).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_rvv.base.errors import RvvError
from pytest_rvv.base.stages import Stages
from pytest_rvv.base.store import Store, content_sha, digest
from pytest_rvv.config.targets import RISCV64, Target
from pytest_rvv.model.model import Model
from pytest_rvv.run.blas_peer import OPENBLAS_SYSROOT, blas_runner
from pytest_rvv.run.blas_peer import prepare as prepare_openblas
from pytest_rvv.run.ggml_peer import GGML_SYSROOT, Q8_0_BLOCK, ggml_runner
from pytest_rvv.run.ggml_peer import prepare as prepare_ggml
from pytest_rvv.run.kept import KeptRuns
from pytest_rvv.run.ncnn_peer import ncnn_fetched, ncnn_runner
from pytest_rvv.run.ncnn_peer import prepare as prepare_ncnn
from pytest_rvv.run.ort_harness import PeerRun, build_harness, run_harness
from pytest_rvv.run.ort_harness import prepare as prepare_ort
from pytest_rvv.run.peer_runner import EmulatedPeerRunner
from pytest_rvv.run.qemu import find_qemu
from pytest_rvv.run.qemu_plugin import (
    build_memtrace_plugin,
    build_plugin,
    check_plugin_support,
    memtrace_option,
    plugin_option,
)
from pytest_rvv.run.recorded import inputs_digest, rss_probe
from pytest_rvv.toolchain.debian_sysroot import SUITE, SysrootRecipe, SysrootUnavailable, cached_sysroot
from pytest_rvv.toolchain.peer_ort import ORT, prepare_sysroot

ONNXRUNTIME, OPENBLAS, GGML, NCNN = "onnxruntime", "openblas", "ggml", "ncnn"  # --rvv-peers words (PEERS below)
PLAIN, COUNTED_ONE, COUNTED_TWO = "plain", "counted-1", "counted-2"
TRACED_ZERO, TRACED_ONE = "traced-0", "traced-1"  # through a core's modelled caches (rvv_memtrace): no call, one call
REPEATS = {PLAIN: 1, COUNTED_ONE: 1, COUNTED_TWO: 2, TRACED_ZERO: 0, TRACED_ONE: 1}
TRACED = (TRACED_ZERO, TRACED_ONE)
NAMESPACE = "peer-runs"
RECIPE = "peer-run-v2"  # v2: counted runs print no timings


@dataclass(frozen=True)
class RecordedPeerRun:
    """One peer run's deterministic results, fresh or from the store."""

    kind: str
    outputs: list[np.ndarray]
    counts: Path | None  # the plugin's output (counted runs)
    code: dict[str, list[tuple[int, int]]]  # each file's executable ranges in the guest (counted runs)
    rss_kb: int | None  # the emulator's peak RSS (plain runs)
    session_s: float
    run_s: float
    wall_s: float
    repro: str
    cached: bool

    def library_of(self, address: int) -> str | None:
        """The file whose code holds the guest ``address`` (counted runs)."""
        for name, ranges in self.code.items():
            if any(start <= address < end for start, end in ranges):
                return name
        return None


class PeerRunner(EmulatedPeerRunner):
    """ONNX Runtime for riscv64 (Debian's rv64gc build) under ``qemu`` with ``target``'s CPU."""

    what = "ONNX Runtime"

    def describe(self) -> str:
        return f"ONNX Runtime {self.sysroot.version} (Debian {SUITE} riscv64, rv64gc)"

    def run(self, model: Path, inputs: list[np.ndarray], workdir: Path, num_outputs: int, *,
            optimizations: str = "all", repeat: int = 1, maps: bool = False, qemu_args: tuple[str, ...] = (),
            launcher: tuple[str, ...] = (), timeout_s: float | None = None, name: str | None = None,
            timings: bool = True) -> PeerRun:
        """One run of ``model`` (raises RunFailed, PeerRejected: one line naming the model)."""
        return run_harness(self.harness, self.sysroot, self.qemu, self.target, model, inputs, workdir, num_outputs,
                           threads=self.threads, optimizations=optimizations, repeat=repeat, maps=maps,
                           qemu_args=qemu_args, launcher=launcher, label=name, timings=timings,
                           **({} if timeout_s is None else {"timeout_s": timeout_s}))

@dataclass(frozen=True)
class Peer:
    """A peer plug-in: the fastest code we can run on the same core beside IREE's, from its own module.

    ``suite`` says which cells it is generated for (``models``: suites/peers, each model x riscv64 target;
    ``kernels``: suites/kernels, each kernel cell), ``serves`` whether it runs a cell (None) or why not (one line),
    ``runner`` fetches and builds what it needs for a target (SysrootUnavailable / ToolMissing: one line),
    ``prepare`` the same without a target (setup's ``peers`` step: ``python -m pytest_rvv.run.peer``), ``fetched``
    what of it is already in the tools cache, without fetching (``pytest-rvv doctor``)."""

    name: str  # its --rvv-peers word
    title: str  # "OpenBLAS"
    library: str  # the file-name prefix of its own code ("libopenblas"): the share of a call spent in it
    suite: str
    runner: Callable[[Target, Path | None, Path | None], EmulatedPeerRunner]
    serves: Callable[[Model, Target], str | None]
    prepare: Callable[[Callable[[str], None]], str]
    fetched: Callable[[Path | None], str | None]  # what of it is in the tools cache (a line), None: not fetched


def _serves_riscv64(model: Model, target: Target) -> str | None:
    return None if target.arch == RISCV64 and target.is_emulated else f"{target.name} is not an emulated riscv64 target"


_NARROW = ("float16", "bfloat16")  # preparation steps that narrow a float32 model (config/kernels.py's f16, bf16 rows)


def _serves_float32(harness: str) -> Callable[[Model, Target], str | None]:
    """A riscv64 cell whose inputs are float32 and stay so; else why not: "its harness ``harness``, not int8"."""
    def serves(model: Model, target: Target) -> str | None:
        if (why := _serves_riscv64(model, target)) is not None:
            return why
        kinds = {spec.dtype for spec in model.inputs} | {step for step in model.preparation if step in _NARROW}
        return None if kinds == {"float32"} else f"its harness {harness}, not {', '.join(sorted(kinds - {'float32'}))}"
    return serves


_serves_f32_matmul = _serves_float32("multiplies float32")


_NCNN_INT8 = ("ncnn runs int8 from its own calibration table (ncnn2table and ncnn2int8 over the float32 net, tools its "
              "wheel does not ship), not from ONNX QuantizeLinear/DequantizeLinear")


_serves_f32_ncnn = _serves_float32("feeds float32 to ncnn")
_serves_f32_or_q8_0 = _serves_float32("multiplies float32 (int8 as q8_0)")


def _serves_ncnn(model: Model, target: Target) -> str | None:
    """A float32 model; an int8 QDQ model is refused with what ncnn would need instead."""
    if "quantize-int8" in model.preparation and _serves_riscv64(model, target) is None:
        return _NCNN_INT8
    return _serves_f32_ncnn(model, target)


def _serves_matmul_q8_0(model: Model, target: Target) -> str | None:
    """ggml: a float32 matmul cell, or an int8 one whose K fills q8_0's blocks of 32 (its weights held as q8_0)."""
    if {spec.dtype for spec in model.inputs} != {"int8"}:
        return _serves_f32_or_q8_0(model, target)
    if (why := _serves_riscv64(model, target)) is not None:
        return why
    k = model.inputs[0].shape[-1]
    return None if k % Q8_0_BLOCK == 0 else f"int8 as q8_0 needs K a multiple of {Q8_0_BLOCK}, not {k}"


def peer_runner(target: Target, qemu_dir: Path | None = None, tools_dir: Path | None = None) -> PeerRunner:
    """The ONNX Runtime peer for ``target``: the sysroot fetched and verified (SysrootUnavailable: one line, e.g.
    without network), the harness built, QEMU found (ToolMissing)."""
    sysroot = prepare_sysroot(tools_dir, log=lambda line: None)
    return PeerRunner(target, find_qemu(target.arch, qemu_dir), sysroot, build_harness(sysroot, tools_dir))


class PeerRuns:
    """The peer's plain and counted runs, each once per content (see the module docstring)."""

    def __init__(self, store: Store, timeout_s: float | None, stages: Stages | None = None,
                 kept: KeptRuns | None = None) -> None:
        """``kept``: the session's runs by content (run/kept.py; fresh with --rvv-no-cache), else the store's."""
        self.store, self.timeout_s, self.stages = store, timeout_s, stages or Stages()
        self.kept = kept or KeptRuns(store)

    def run(self, kind: str, runner: EmulatedPeerRunner, model: Path, inputs: list[np.ndarray], num_outputs: int,
            optimizations: str, name: str | None = None, sample: int = 0,
            caches: tuple[int, int, int, int, int] | None = None) -> RecordedPeerRun:
        """The ``kind`` run of ``model`` (``name``: the model's name in a failure's line). ``sample``: another run of
        the same content, kept apart (a run with the peer's own threads differs from run to run in how long its idle
        workers wait: measure/peer_threads.py compares two). ``caches``: a traced run's cache geometry (L1 sets and
        ways, L2 sets and ways, line bytes); its ``counts`` is then the memory trace (measure/traffic.py reads it)."""
        if kind not in REPEATS:
            raise ValueError(f"unknown peer run kind {kind!r}")
        if (kind in TRACED) != (caches is not None):
            raise ValueError(f"a {kind} peer run {'needs' if kind in TRACED else 'takes no'} cache geometry")
        if kind == PLAIN:
            helper = rss_probe(self.store)
        else:
            check_plugin_support(runner.qemu)
            helper = build_memtrace_plugin(self.store) if kind in TRACED else build_plugin(self.store)
        key = digest([RECIPE, kind, *runner.identity(), content_sha(model), content_sha(helper), inputs_digest(inputs),
                      optimizations, str(num_outputs), *([f"sample={sample}"] if sample else []),
                      *([f"caches={caches}"] if caches else [])])

        def emulate(into: Path) -> dict[str, Any]:
            with tempfile.TemporaryDirectory(prefix="pytest-rvv-peer-") as scratch:
                work = Path(scratch)
                counts, rss = work / "counts.txt", work / "rss.txt"
                launcher = (str(helper), str(rss)) if kind == PLAIN else ()
                qemu_args = (() if kind == PLAIN else memtrace_option(helper, counts, caches) if caches
                             else plugin_option(helper, counts, False))
                with self.stages.time("emulate"):
                    run = runner.run(model, inputs, work / "run", num_outputs, optimizations=optimizations,
                                     repeat=REPEATS[kind], maps=kind != PLAIN, qemu_args=qemu_args,
                                     launcher=launcher, timeout_s=self.timeout_s, name=name,
                                     timings=kind == PLAIN)
                for i, array in enumerate(run.outputs):
                    np.save(into / f"output_{i}.npy", array, allow_pickle=False)
                if counts.is_file():
                    shutil.copyfile(counts, into / "counts.txt")
                (into / "code.json").write_text(json.dumps(run.code or {}))
                return {"kind": kind, "outputs": len(run.outputs), "model": model.name, "target": runner.target.name,
                        "rss_kb": int(rss.read_text()) if rss.is_file() else None, "session_s": run.session_s,
                        "run_s": run.run_s, "wall_s": round(run.process.wall_s, 4),
                        "repro": f"cd {work / 'run'} && env -i {shlex.join(run.process.argv[len(launcher):])}"}

        entry = self.kept.get_or_build(NAMESPACE, key, emulate)
        if not entry.created:
            self.stages.hit("emulate")
        meta = entry.meta
        code = {name: [(int(start), int(end)) for start, end in ranges]
                for name, ranges in json.loads(entry.file("code.json").read_text()).items()}
        counts_file = entry.path / "counts.txt"
        return RecordedPeerRun(kind, [np.load(entry.file(f"output_{i}.npy"), allow_pickle=False)
                                      for i in range(int(meta["outputs"]))],
                               counts_file if counts_file.is_file() else None, code,
                               meta.get("rss_kb"), float(meta["session_s"]), float(meta["run_s"]),
                               float(meta["wall_s"]), str(meta["repro"]), cached=not entry.created)


def _fetched(recipe: SysrootRecipe) -> Callable[[Path | None], str | None]:
    def fetched(tools_dir: Path | None) -> str | None:
        sysroot = cached_sysroot(recipe, tools_dir)
        return None if sysroot is None else sysroot.describe()
    return fetched


PEERS: dict[str, Peer] = {p.name: p for p in (
    Peer(ONNXRUNTIME, "ONNX Runtime", "libonnxruntime", "models", peer_runner, _serves_riscv64, prepare_ort,
         _fetched(ORT)),
    Peer(OPENBLAS, "OpenBLAS", "libopenblas", "kernels", blas_runner, _serves_f32_matmul, prepare_openblas,
         _fetched(OPENBLAS_SYSROOT)),
    Peer(GGML, "ggml", "libggml", "kernels", ggml_runner, _serves_matmul_q8_0, prepare_ggml, _fetched(GGML_SYSROOT)),
    Peer(NCNN, "ncnn", "ncnn", "models", ncnn_runner, _serves_ncnn, prepare_ncnn,
         ncnn_fetched),
)}


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_rvv.run.peer [PEER ...]``: fetch and build every peer (or those named); exit 3 when one
    could not be fetched (its line says why; the others are still prepared), 1 on another failure."""
    names = argv or list(PEERS)
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        print(f"[peers] unknown peer {', '.join(unknown)} (known: {', '.join(PEERS)})", file=sys.stderr)
        return 2
    worst = 0
    for name in names:
        def log(line: str, name: str = name) -> None:
            print(f"[peers] {name}: {line}", flush=True)

        try:
            log(PEERS[name].prepare(log))
        except SysrootUnavailable as exc:
            print(f"[peers] {name}: {exc}", file=sys.stderr)
            worst = max(worst, 3)
        except RvvError as exc:
            print(f"[peers] {name}: {exc}", file=sys.stderr)
            worst = 1 if worst in (0, 1) else worst
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
