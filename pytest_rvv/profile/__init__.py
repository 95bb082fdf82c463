"""Measure stage, executed side: a QEMU TCG plugin counting what actually runs, per dispatch."""
