"""Judge stage: the vectorization gate and snapshots, expected failures, the performance policy and verdicts, stored
baselines, which one applies and the recorder that writes them, the checks the suites call. Returns verdicts; may
import measure/ and below."""
