"""Admin routes under /api/admin; every one requires an admin API key (API-2)."""
