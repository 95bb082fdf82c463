"""Import and compile through the content-addressed cache, yielding Artifacts."""

from __future__ import annotations

import json
import platform
import re
import shlex
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvv.base.errors import CompileFailed, ImportFailed, ToolMissing, first_lines, tail
from pytest_rvv.base.process import ProcessResult, run_process
from pytest_rvv.base.stages import Stages
from pytest_rvv.base.store import Store, content_sha, digest
from pytest_rvv.base.tools import allocator_env
from pytest_rvv.compile.phases import (
    GLOBAL_PHASE,
    PHASE,
    PROBE,
    device_attribute,
    fingerprint,
    global_groups,
    global_key,
    group_key,
    occurrences,
    retarget,
    shared_groups,
)
from pytest_rvv.compile.ukernels import INTERMEDIATES, enables_ukernels, load_ukernels, record_ukernels
from pytest_rvv.config.settings import allocator as configured_allocator
from pytest_rvv.config.settings import default_tools_dir
from pytest_rvv.config.targets import HOST, Target
from pytest_rvv.toolchain.toolchain import Toolchain

COMPILE_TIMEOUT_S = 1800.0
EXECUTABLES = "executables"
_FUNC = re.compile(r'func\.func @(?:"([^"]+)"|([^\s(]+))\(')


_Phase = tuple[Path, float, str, str]  # a phase's copy for one target, its CPU seconds, how it was made, its name


@dataclass(frozen=True)
class Artifact:
    """A compiled IREE module (.vmfb) for one model on one target."""

    model: str
    target: Target
    path: Path
    function: str
    key: str
    flags: tuple[str, ...]
    compiler_version: str
    compile_s: float  # the compiler's own CPU time (user + sys) when it was built: -n auto contention moves it little
    reused: bool
    executables: tuple[Path, ...] = ()  # the dispatch libraries (ELF .so) embedded in the module
    ukernels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # dispatch function -> microkernels

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size


@dataclass(frozen=True)
class ImportedModel:
    """MLIR imported from a prepared .onnx, plus the entry function's name."""

    path: Path
    function: str
    sha256: str


class Compiler:
    """Turns prepared .onnx files into Artifacts, caching every stage in ``store``."""

    def __init__(self, toolchain: Toolchain, store: Store, stages: Stages | None = None,
                 targets: Iterable[Target] = (), allocator: str | None = None, tools_dir: Path | None = None) -> None:
        """``targets``: the run's targets; those that share all flags but their CPU share one compile up to
        codegen, and all that share all flags but where the code runs and its matmul path one compile through global
        optimization (compile/phases.py). ``allocator`` and ``tools_dir``: the session's settings (by default read from
        the environment now)."""
        self.toolchain = toolchain
        self.store = store
        self.stages = stages or Stages()
        self.allocator = allocator or configured_allocator()
        self.tools_dir = tools_dir or default_tools_dir()
        targets = list(targets)
        self.shared = shared_groups(t.compiler_flags() for t in targets if t.arch != HOST)
        self.global_shared = global_groups((t.compiler_flags() for t in targets), self.shared)

    def import_onnx(self, model_name: str, prepared: Path, opset: int | None) -> ImportedModel:
        """Import with ``--opset-version opset`` (None: the model's own opset)."""
        # v2: a deterministic importer error is cached like a compiler error; v3: the importer is in the key;
        # v4: by its code, not its path (the path held the checkout's .venv: every clone imported and compiled
        # everything again, and a cache restored on a CI runner with another workspace path was never used)
        key = digest(["import-v4", content_sha(prepared), str(opset), self.toolchain.compiler_version,
                      _script_identity(self.toolchain.iree_import_onnx)])

        def build(tmp: Path) -> dict[str, object]:
            with self.stages.time("import"):
                return do_import(tmp)

        def do_import(tmp: Path) -> dict[str, object]:
            out = tmp / "model.mlir"
            upgrade = ["--opset-version", str(opset)] if opset is not None else []
            argv = [self.toolchain.iree_import_onnx, prepared, *upgrade, "-o", out]
            result = run_process(argv, timeout_s=COMPILE_TIMEOUT_S)
            message = (f"iree-import-onnx failed on model {model_name!r} ({result.status()}): "
                       f"{first_lines(result.stderr + result.stdout, 1)}")
            log = f"$ {result.command_line()}\n{tail(result.stderr, 40)}"
            if result.ok:
                return {"model": model_name, "function": _entry_function(out), "import_s": round(result.wall_s, 3),
                        "status": "ok"}
            if result.timed_out or result.returncode < 0:
                raise ImportFailed(message, log=log)
            missing = _MISSING_MODULE.search(result.stderr)
            if missing:  # the importer's environment, not the model: never cached
                raise ToolMissing(f"{self.toolchain.iree_import_onnx} cannot run: {missing.group(0)}; install it "
                                  "into that importer's Python environment (e.g. pip install onnx)")
            out.unlink(missing_ok=True)
            return {"model": model_name, "status": "failed", "error": message, "log": log}

        entry = self.store.get_or_build("imports", key, build)
        if not entry.created:
            self.stages.hit("import")
        if entry.meta.get("status") == "failed":
            raise ImportFailed(str(entry.meta["error"]), log=str(entry.meta["log"]))
        return ImportedModel(entry.file("model.mlir"), str(entry.meta["function"]), key)

    def given_mlir(self, model_name: str, text: str) -> ImportedModel:
        """MLIR a model gives as it is (a published benchmark's own function), stored by content like an import."""
        key = digest(["mlir-v1", text])

        def build(tmp: Path) -> dict[str, object]:
            (tmp / "model.mlir").write_text(text)
            return {"model": model_name, "function": _entry_function(tmp / "model.mlir"), "status": "ok"}

        entry = self.store.get_or_build("imports", key, build)
        return ImportedModel(entry.file("model.mlir"), str(entry.meta["function"]), key)

    def compile(self, model_name: str, imported: ImportedModel, target: Target) -> Artifact:
        """Compile ``imported`` for ``target``; a compiler error is cached and re-raised."""
        flags = target.compiler_flags()
        machine = [platform.processor() or platform.machine(), _host_cpu_model()] if target.arch == HOST else []
        # v2: entries also hold the dispatch libraries (ELF) for static analysis; v3: compile CPU time;
        # v4: the input named relative to its folder (the module no longer holds the cache's path)
        # (with microkernels the entry also records which ones each dispatch carries: compile/ukernels.py)
        recipe = ["compile-v4"] + (["ukernels-v1"] if enables_ukernels(flags) else [])
        key = digest([*recipe, imported.sha256, self.toolchain.compiler_version, *flags, *machine])

        def build(tmp: Path) -> dict[str, object]:
            with self.stages.time("compile"):
                return do_compile(tmp)

        def do_compile(tmp: Path) -> dict[str, object]:
            out = tmp / "module.vmfb"
            dump = f"--iree-hal-dump-executable-binaries-to={tmp / EXECUTABLES}"
            # iree-compile writes the input's path, as given, into the module and into each dispatch
            # library's debug info: run it beside the input and name the input by its file name alone,
            # so the bytes (and every size and estimate read from them) do not depend on where the
            # cache is (the user, HOME, PYTEST_RVV_CACHE_DIR).
            argv = [self.toolchain.iree_compile, imported.path.name, *flags, dump, "-o", out]
            full = f"cd {imported.path.parent} && {shlex.join(map(str, argv))}"  # what the module is, byte for byte
            cwd, phase_s, made = imported.path.parent, 0.0, "full"
            phase = self._shared_phase(imported, flags, tmp) if target.arch != HOST else None
            phase = phase or self._global_phase(imported, flags, tmp, machine)
            if phase is not None:  # a shared phase, retargeted: the same bytes as the full compile
                source, phase_s, made, name = phase
                argv = [self.toolchain.iree_compile, source.name, *flags, f"--compile-from={name}", dump, "-o", out]
                cwd = source.parent
            ukernels = enables_ukernels(flags)
            if ukernels:  # the optimized IR still names the microkernels LLVM inlined (compile/ukernels.py)
                argv[-2:-2] = [f"--iree-hal-dump-executable-intermediates-to={tmp / INTERMEDIATES}"]
            start = time.perf_counter()
            result = run_process(argv, timeout_s=COMPILE_TIMEOUT_S, env=self._env(), cwd=cwd)
            elapsed = round(time.perf_counter() - start, 3)
            if phase is not None:
                phase[0].unlink()
            meta: dict[str, object] = {
                "model": model_name, "target": target.name, "flags": flags,
                "compiler_version": self.toolchain.compiler_version, "compile_wall_s": elapsed,
                "compile_s": round(result.cpu_s + phase_s, 3), "made": made,
                "command": full,
            }
            if ukernels:
                if result.ok:
                    record_ukernels(tmp / INTERMEDIATES, tmp)
                shutil.rmtree(tmp / INTERMEDIATES, ignore_errors=True)
            return meta | self._outcome(result, model_name, target, tmp)

        entry = self.store.get_or_build("compile", key, build)
        if not entry.created:
            self.stages.hit("compile")
        meta = entry.meta
        if meta["status"] != "ok":
            log = entry.file("compile.log").read_text()
            raise CompileFailed(
                f"iree-compile rejected model {model_name!r} for target {target.name!r}: "
                f"{str(meta['error']).splitlines()[0]}",
                log=f"$ {meta['command']}\n{meta['error']}\n--- log tail ---\n{tail(log, 30)}",
            )
        return Artifact(
            model=model_name, target=target, path=entry.file("module.vmfb"), function=imported.function,
            executables=tuple(sorted(entry.file(EXECUTABLES).glob("*.so"))),
            key=key, flags=tuple(flags), compiler_version=self.toolchain.compiler_version,
            compile_s=float(meta["compile_s"]), reused=not entry.created, ukernels=load_ukernels(entry.path),
        )

    def _shared_phase(self, imported: ImportedModel, flags: list[str], tmp: Path) -> _Phase | None:
        """This target's copy of its group's executable-sources phase in ``tmp`` (made from the global phase when
        that is shared too); None when the target shares no phase in this run, or the phase cannot be shared."""
        group = group_key(flags)
        probed = self._probe(flags) if group in self.shared else None
        if probed is None:
            return None
        key = digest(["phase-v1", PHASE, imported.sha256, self.toolchain.compiler_version, *group])

        def argv(out: Path) -> tuple[list[str | Path], Path, float]:
            start = self._global_phase(imported, flags, out)
            if start is None:
                return [imported.path.name, *flags, f"--compile-to={PHASE}"], imported.path.parent, 0.0
            source, global_s, _, _ = start
            return ([source.name, *flags, f"--compile-from={GLOBAL_PHASE}", f"--compile-to={PHASE}"], source.parent,
                    global_s)

        return self._phase(key, PHASE, "sources.mlir", imported, probed[0], argv, tmp)

    def _global_phase(self, imported: ImportedModel, flags: list[str], tmp: Path,
                      machine: Sequence[str] = ()) -> _Phase | None:
        """This target's copy of its global group's global-optimization phase in ``tmp``; None when the target
        shares none in this run, its probe says the toolchain reads the target there, or the phase cannot be shared.
        ``machine``: the host's CPU, for a target that compiles for it (its attribute names that CPU)."""
        if global_key(flags) not in self.global_shared:
            return None
        probed = self._probe(flags, machine)
        if probed is None:
            return None
        key = digest(["global-phase-v1", GLOBAL_PHASE, imported.sha256, self.toolchain.compiler_version,
                      *global_key(flags), probed[1]])

        def argv(out: Path) -> tuple[list[str | Path], Path, float]:
            # in the generic form: the custom one leaves out some block arguments' locations (nsnet2's loop), which
            # the module's debug info then names by the phase's own lines
            return ([imported.path.name, *flags, f"--compile-to={GLOBAL_PHASE}", "--mlir-print-op-generic"],
                    imported.path.parent, 0.0)

        return self._phase(key, GLOBAL_PHASE, "global.mlir", imported, probed[0], argv, tmp)

    def _phase(self, key: str, name: str, file: str, imported: ImportedModel, wanted: str,
               argv: Callable[[Path], tuple[list[str | Path], Path, float]], tmp: Path) -> _Phase | None:
        """Compile the phase ``name`` once (cached by ``key``; ``argv(out)``: its arguments, folder and the CPU of
        the phase it starts from) and copy it into ``tmp`` retargeted to the target attribute ``wanted``, with its
        CPU seconds (counted in every module made from it: ``compile_s`` stays the CPU a module costs from its
        import)."""

        def build(out: Path) -> dict[str, object]:
            sources = out / file
            args, cwd, before_s = argv(out)
            # --mlir-print-debuginfo keeps the input's locations, which the module's debug info names
            command = [self.toolchain.iree_compile, *args, "--mlir-print-debuginfo", "-o", sources]
            result = run_process(command, timeout_s=COMPILE_TIMEOUT_S, env=self._env(), cwd=cwd)
            for start in out.glob("*.mlir"):  # the phase this one started from: not part of the entry
                if start != sources:
                    start.unlink()
            if result.timed_out or result.returncode < 0:  # not deterministic: nothing cached
                raise CompileFailed(f"iree-compile {result.status()} compiling {imported.path} to {name}",
                                    log=f"$ {result.command_line()}\n{tail(result.stderr, 40)}")
            attribute = None
            if result.ok and sources.is_file():
                with sources.open() as head:
                    attribute = device_attribute(head.read(1 << 16))
            if attribute is None:  # the full compile says why, or compiles what a phase cannot share
                sources.unlink(missing_ok=True)
                return {"status": "unshared", "error": first_lines(result.stderr, 3)}
            return {"status": "ok", "attribute": attribute, "phase_s": round(result.cpu_s + before_s, 3),
                    "offsets": occurrences(sources, attribute)}

        entry = self.store.get_or_build("phases", key, build)
        if entry.meta.get("status") != "ok":
            return None
        copy = tmp / file
        retarget(entry.file(file), str(entry.meta["attribute"]), wanted, copy, entry.meta.get("offsets"))
        return copy, float(entry.meta["phase_s"]), f"shared {name} phase {key[:12]}, compiled from it", name

    def _env(self) -> dict[str, str] | None:
        """iree-compile's environment: the wheels' compiler runs on tcmalloc (base/tools.py), a user's own build on
        the allocator it was built with (a sanitizer build must not be given another one)."""
        return allocator_env(self.allocator, self.tools_dir) if self.toolchain.build_dir is None else None

    def _probe(self, flags: list[str], machine: Sequence[str] = ()) -> tuple[str, str] | None:
        """The target attribute iree-compile gives the device of ``flags`` and the fingerprint of its global phase
        (compile/phases.py ``PROBE``), or None when the probe does not compile to one device."""
        key = digest(["device-probe-v1", GLOBAL_PHASE, self.toolchain.compiler_version, *flags, *machine])

        def build(tmp: Path) -> dict[str, object]:
            (tmp / "probe.mlir").write_text(PROBE)
            result = run_process([self.toolchain.iree_compile, "probe.mlir", *flags, f"--compile-to={GLOBAL_PHASE}",
                                  "-o", "probe.out.mlir"], timeout_s=COMPILE_TIMEOUT_S, env=self._env(), cwd=tmp)
            out = tmp / "probe.out.mlir"
            text = out.read_text() if result.ok and out.exists() else ""
            attribute = device_attribute(text)
            out.unlink(missing_ok=True)
            (tmp / "probe.mlir").unlink()
            return {"attribute": attribute, "fingerprint": fingerprint(text, attribute) if attribute else None}

        meta = self.store.get_or_build("phases", key, build).meta
        if not meta.get("attribute") or not meta.get("fingerprint"):
            return None
        return str(meta["attribute"]), str(meta["fingerprint"])

    def _outcome(self, result: ProcessResult, model_name: str, target: Target, tmp: Path) -> dict[str, object]:
        """Sort an iree-compile run four ways: ok; a deterministic failure, cached with its log (an unknown CPU
        feature LLVM would ignore, the compiler's own abort, an error); or a timeout or kill, raised and not cached."""
        unknown = sorted(set(_UNKNOWN_FEATURE.findall(result.stderr)))
        if result.ok and not unknown:
            return {"status": "ok"}
        fatal = _LLVM_FATAL.search(result.stderr)
        crashed = fatal is not None and result.returncode < 0 and not result.timed_out  # its own abort: deterministic
        if not result.ok and (result.timed_out or result.returncode < 0) and not crashed:  # not deterministic
            raise CompileFailed(
                f"iree-compile {result.status()} on model {model_name!r} for target {target.name!r}",
                log=f"$ {result.command_line()}\n{tail(result.stderr, 40)}",
            )
        (tmp / "module.vmfb").unlink(missing_ok=True)
        shutil.rmtree(tmp / EXECUTABLES, ignore_errors=True)
        (tmp / "compile.log").write_text(result.stderr[-20000:])
        if result.ok:  # LLVM drops an unknown feature with a warning: refuse, never ignore
            return {"status": "failed", "error": (
                f"iree-compile {self.toolchain.compiler_version} does not know the CPU feature(s) "
                f"{', '.join(unknown)} (LLVM would ignore them silently); fix the target's features")}
        if crashed and fatal is not None:
            said = fatal.group(0)
            return {"status": "failed",
                    "error": f"iree-compile crashed ({result.status()}): {said}" + _hint(said, target)}
        return {"status": "failed", "error": first_lines(result.stderr, 3)}


_LLVM_FATAL = re.compile(r"LLVM ERROR: [^\n]*")
_UNKNOWN_FEATURE = re.compile(r"'([^']+)' is not a recognized feature for this target")
_MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): [^\n]*")


def _script_identity(path: Path) -> str:
    """A console script by what it runs: its text without the ``#!`` line (which names the environment's path);
    a binary by its bytes."""
    data = path.resolve().read_bytes()
    if data.startswith(b"#!"):
        data = data.partition(b"\n")[2]
    return digest([data])


def _hint(error: str, target: Target) -> str:
    """What an abort usually means for this target (measured with IREE 3.13.0), or nothing."""
    has_half = any(f in target.features for f in ("+zvfh", "+zvfhmin"))
    if "soft promote" in error and target.has_vector and target.arch == "riscv64" and not has_half:
        return (" (float16 code on a vector unit without +zvfh/+zvfhmin: add them to the target's features, "
                "e.g. the rva23u64 target, or run it on rv64gc)")
    return ""


def _entry_function(mlir: Path) -> str:
    with mlir.open(errors="replace") as f:
        for line in f:
            if match := _FUNC.search(line):
                return match.group(1) or match.group(2)
    raise CompileFailed(f"{mlir}: no func.func in the imported MLIR; the ONNX graph may be empty")


def _host_cpu_model() -> str:
    """The host CPU's model name and feature flags: a host build is only valid on the same CPU."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    wanted = [next((ln for ln in lines if ln.startswith(key)), "") for key in ("model name", "flags")]
    return json.dumps(wanted)
