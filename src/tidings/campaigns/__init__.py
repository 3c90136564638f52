"""Campaign use cases: compose (drafts, preview, test send); later prepare, submit, finalise."""
