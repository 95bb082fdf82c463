#!/usr/bin/env bash
# Set up everything pytest-rvv needs on Debian 12 (bookworm), idempotently.
#
#   bash scripts/setup.sh            # system packages, QEMU 10 with plugins, .venv with pytest-rvv
#   bash scripts/setup.sh system     # only apt packages
#   bash scripts/setup.sh qemu       # only the plugin-capable QEMU build
#   bash scripts/setup.sh python     # only the virtual environment
#   bash scripts/setup.sh runtime    # only IREE's riscv64 runtime, built from IREE's source
#   bash scripts/setup.sh peers      # only the peers' riscv64 builds (Debian 13, PyPI) and their harnesses
#
# QEMU >= 9 is required for RVV work (Debian 12's 7.2 lacks riscv_hwprobe and crashes on RVV code),
# and Debian's newer qemu-user packages are static builds that cannot load TCG plugins. So this
# script builds QEMU 10.0.2 from Debian's own bookworm-backports source tarball (~3 min on 2 cores)
# into $PYTEST_RVV_TOOLS_DIR (default ~/.cache/pytest-rvv/tools), where pytest-rvv finds it.
# No registry ships IREE's runtime for riscv64 either: the `runtime` step builds a static
# riscv64 iree-run-module (~1-3 min on 2 cores, once) from IREE's source, taken from
# $PYTEST_RVV_IREE_SRC (a directory or .tar.xz) or a git clone at the compiler's commit.
# The `peers` step fetches each peer's riscv64 build and its dependencies from Debian 13 (trixie;
# ggml from unstable) with a private apt configuration (the system's apt state stays as it is; 15-32 MB
# each, seconds) into the tools cache and cross-builds a small harness for each: ONNX Runtime, OpenBLAS,
# ggml; for ncnn, Debian's riscv64 Python 3.13 and the ncnn (riscv64) and pnnx (x86_64) wheels from PyPI.
set -euo pipefail

QEMU_VERSION=10.0.2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS_DIR=${PYTEST_RVV_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-rvv/tools}
QEMU_PREFIX=$TOOLS_DIR/qemu-$QEMU_VERSION
VENV=${PYTEST_RVV_VENV:-$ROOT/.venv}
# Debian's own python3 (3.11.2 on Debian 12) is what a fresh user has: use it when it is there, so
# every run (CI included) exercises the interpreter a new user meets. PYTHON=... overrides.
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
log() { printf '[setup] %s\n' "$*"; }

setup_system() {
    local sources=/etc/apt/sources.list.d/pytest-rvv-bookworm-backports.sources
    if [ ! -f "$sources" ]; then
        log "adding bookworm-backports (deb and deb-src) as $sources"
        $SUDO tee "$sources" >/dev/null <<'SRC'
Types: deb deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    fi
    log "apt-get update"
    $SUDO apt-get update -qq
    log "installing cross binutils, riscv64 cross gcc, arm64 cross runtime libraries and QEMU build dependencies"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        binutils-riscv64-linux-gnu binutils-aarch64-linux-gnu gcc-riscv64-linux-gnu libc6-dev-riscv64-cross \
        g++-riscv64-linux-gnu clang-22 llvm-22 git openssh-client openssh-server chromium \
        libc6-arm64-cross libstdc++6-arm64-cross \
        gcc libc6-dev make pkg-config ninja-build libglib2.0-dev xz-utils dpkg-dev \
        python3-venv python3-dev >/dev/null
}

# QEMU's own code compiled for x86-64-v3 (AVX2, FMA) where the host runs it: QEMU's JIT emits AVX2 and leaves the
# upper halves of the YMM registers dirty inside a translated block, so its legacy-SSE float helpers (softfloat's
# float32_muladd around glibc's VEX fmaf) paid an SSE/AVX transition on every call: the f16 1024^3 inner-tiled matmul
# took 164 s under QEMU built as Debian does and 45 s built this way, with bit-identical outputs (docs/ci.md).
# A host without x86-64-v3 gets the portable build (as every build before this choice was: a build without a record
# counts as portable); a cached build made for the other choice is built again.
qemu_cflags() {
    [ "$(uname -m)" = x86_64 ] || return 0
    local help  # read whole: under pipefail, 'ld.so --help | grep -q' can fail on SIGPIPE after a match
    help=$(/lib64/ld-linux-x86-64.so.2 --help 2>/dev/null) || return 0
    case $help in *"x86-64-v3 (supported"*) echo "-march=x86-64-v3" ;; esac
}

setup_qemu() {
    local cflags
    cflags=$(qemu_cflags)
    if [ -x "$QEMU_PREFIX/bin/qemu-riscv64" ] && [ -x "$QEMU_PREFIX/bin/qemu-aarch64" ] \
        && [ -f "$QEMU_PREFIX/include/qemu-plugin.h" ] \
        && [ "$(cat "$QEMU_PREFIX/build-cflags" 2>/dev/null || echo cflags=)" = "cflags=$cflags" ]; then
        log "QEMU $QEMU_VERSION already built in $QEMU_PREFIX${cflags:+ ($cflags)}"
        return
    fi
    local work
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN
    log "fetching Debian's qemu $QEMU_VERSION source tarball (bookworm-backports)"
    # The .dsc is not always downloadable; the orig tarball is all we need.
    (cd "$work" && apt-get source --download-only "qemu/bookworm-backports" >/dev/null 2>&1 || true)
    local tarball
    tarball=$(ls "$work"/qemu_"$QEMU_VERSION"*.orig.tar.* 2>/dev/null | head -n 1 || true)
    if [ -z "$tarball" ]; then
        echo "setup: could not download qemu_${QEMU_VERSION}+ds.orig.tar.xz with 'apt-get source qemu/bookworm-backports'; check the deb-src entry in /etc/apt/sources.list.d/pytest-rvv-bookworm-backports.sources" >&2
        exit 1
    fi
    log "unpacking $(basename "$tarball")"
    tar -C "$work" -xf "$tarball"
    local src
    src=$(find "$work" -maxdepth 1 -type d -name 'qemu*' | head -n 1)
    log "creating a build venv with meson and pycotap"
    "$PYTHON" -m venv "$work/venv"
    "$work/venv/bin/pip" install -q 'meson>=1.5' 'pycotap==1.3.1'
    log "configuring QEMU (riscv64 and aarch64 user mode, plugins on${cflags:+, $cflags})"
    mkdir -p "$src/build"
    (cd "$src/build" && PATH="$work/venv/bin:$PATH" ../configure \
        --prefix="$QEMU_PREFIX" \
        --target-list=riscv64-linux-user,aarch64-linux-user \
        --enable-plugins --disable-system --disable-tools --disable-docs \
        --disable-install-blobs --disable-werror ${cflags:+--extra-cflags="$cflags"} \
        --python="$work/venv/bin/python3" >"$work/configure.log" 2>&1) \
        || { tail -n 30 "$work/configure.log" >&2; exit 1; }
    log "building QEMU (make -j$(nproc)); takes about 3 minutes on 2 cores"
    (cd "$src/build" && PATH="$work/venv/bin:$PATH" make -j"$(nproc)" >"$work/build.log" 2>&1) \
        || { tail -n 30 "$work/build.log" >&2; exit 1; }
    local staging="$QEMU_PREFIX.partial.$$"
    rm -rf "$staging"
    mkdir -p "$staging/bin" "$staging/include"
    cp "$src/build/qemu-riscv64" "$src/build/qemu-aarch64" "$staging/bin/"
    cp "$src/include/qemu/qemu-plugin.h" "$staging/include/"
    echo "cflags=$cflags" >"$staging/build-cflags"
    rm -rf "$QEMU_PREFIX"
    mv "$staging" "$QEMU_PREFIX"
    log "QEMU $QEMU_VERSION installed in $QEMU_PREFIX: $("$QEMU_PREFIX/bin/qemu-riscv64" --version | head -n 1)"
}

setup_python() {
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo "setup: $PYTHON is $("$PYTHON" --version 2>&1 || echo 'not runnable'); pytest-rvv needs Python >= 3.11 (pyproject.toml requires-python): run with PYTHON=/path/to/python3.11+" >&2
        exit 1
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    log "installing pytest-rvv and its dependencies into $VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e "$ROOT[dev,runtime-build]"
}

setup_runtime() {
    # Exit 3 from build-runtime: no IREE source to be had here; say so and go on.
    local rc=0
    "$VENV/bin/pytest-rvv" build-runtime || rc=$?
    if [ "$rc" -eq 3 ]; then
        log "no riscv64 runtime built (see the line above): riscv64 execution tests will skip until you set PYTEST_RVV_IREE_SRC or pass --rvv-runtime-riscv64"
    elif [ "$rc" -ne 0 ]; then
        exit "$rc"
    fi
}

setup_peers() {
    # Exit 3: a peer's riscv64 packages could not be fetched (the line above says why); go on.
    local rc=0
    "$VENV/bin/python" -m pytest_rvv.run.peer || rc=$?
    if [ "$rc" -eq 3 ]; then
        log "a peer for riscv64 is missing (see the line above): its tests will skip until 'bash scripts/setup.sh peers' succeeds"
    elif [ "$rc" -ne 0 ]; then
        exit "$rc"
    fi
}

# gperftools' tcmalloc for the wheels' iree-compile (the same modules for 7 % less CPU: docs/ci.md), unpacked from
# Debian's libtcmalloc-minimal4 into the tools folder, not installed: a library installed on the host enters the host's
# /etc/ld.so.cache, which the peers' riscv64 guests read (their sysroots have none) and which moves their counted work
setup_tcmalloc() {
    local dir="$TOOLS_DIR/tcmalloc"
    if [ -f "$dir/libtcmalloc_minimal.so.4" ]; then
        log "tcmalloc already in $dir"
        return
    fi
    local work
    work=$(mktemp -d)
    (cd "$work" && apt-get download -qq libtcmalloc-minimal4 >/dev/null 2>&1) \
        || { rm -rf "$work"; log "could not download libtcmalloc-minimal4: iree-compile runs on glibc's malloc"; return; }
    dpkg-deb -x "$work"/libtcmalloc-minimal4_*.deb "$work/x"
    mkdir -p "$TOOLS_DIR"
    local staging="$dir.partial.$$"
    rm -rf "$staging"
    mkdir -p "$staging"
    cp -L "$(find "$work/x" -name 'libtcmalloc_minimal.so.4' | head -n 1)" "$staging/libtcmalloc_minimal.so.4"
    rm -rf "$dir" && mv "$staging" "$dir"
    rm -rf "$work"
    log "tcmalloc unpacked into $dir"
}

case "${1:-all}" in
    system) setup_system ;;
    qemu) setup_qemu ;;
    python) setup_python ;;
    runtime) setup_runtime ;;
    peers) setup_peers ;;
    tcmalloc) setup_tcmalloc ;;
    all) setup_system; setup_qemu; setup_tcmalloc; setup_python; setup_runtime; setup_peers ;;
    *) echo "usage: $0 [all|system|qemu|tcmalloc|python|runtime|peers]" >&2; exit 2 ;;
esac
