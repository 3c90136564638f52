"""Admin access: API keys (SPEC API-2), operators, their sign-in and the audit log (UI-2)."""
