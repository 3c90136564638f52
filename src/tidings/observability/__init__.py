"""Logging, metrics and event names. A leaf: imports nothing else from tidings."""
