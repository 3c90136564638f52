"""Engagement (SPEC §5.9): taking in opens and clicks, telling people from machines, the
counters results are read from, and a person's activity."""
