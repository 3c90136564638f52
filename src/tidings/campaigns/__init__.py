"""Campaign use cases (SPEC §5): compose, send and schedule, prepare, the send's three jobs and
their submit strategies, finalise, status, control and retry."""
