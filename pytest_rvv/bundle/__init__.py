"""Bundles: a selection's riscv64 cells, written to run natively on any RISC-V machine with nothing installed
(compiled modules, the static runtime, seeded inputs, a facts probe and one POSIX shell script). Its results come
back to the suites through run/bundle_results.py. Imports session/ and below."""
