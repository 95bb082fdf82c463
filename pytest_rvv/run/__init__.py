"""Run stage: runtimes, emulators and the process runner."""
