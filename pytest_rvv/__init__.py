"""pytest-rvv: regression tests for ML compilers (IREE) on RISC-V vector targets."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pytest-rvv")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
