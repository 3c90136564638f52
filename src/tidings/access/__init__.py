"""Admin access: API keys (SPEC API-2)."""
