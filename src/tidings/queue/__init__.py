"""The durable job queue: one table for every kind of background work (DLV-1..4)."""
