"""The `tidings` command line (SPEC CLI-1)."""
