"""Toolchains compared: A/B in one run (ab.py, report.py), bisect and sweep over releases, reproducers.
May import judge/ and below (not conformance/, its sibling)."""
