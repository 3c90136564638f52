"""Feed-to-email (AUT-2): following a feed, the digest step, and its jobs."""
