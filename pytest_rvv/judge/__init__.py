"""Judge stage: the vectorization gate and snapshots, expected failures, the performance policy and verdicts, stored
baselines and which one applies, the checks the suites call. Returns verdicts; may import measure/ and below."""
