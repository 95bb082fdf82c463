"""Report stage: terminal sections (agreement, vectorization, performance, notices), Table 1 and plots, the HTML page,
results.json, merge and history. Formats what tests recorded; may import comparison/, conformance/ and below."""
