"""Measure stage: static code (disassembly, classify, matching), executed counts and silicon estimates (counts,
executed, silicon), time/memory/sizes (performance, metrics), agreement with onnxruntime. May import session.py and
below; never judge/ or report/."""
