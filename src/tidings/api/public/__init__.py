"""Public routes: JSON under /api/, pages at the short paths links in mail use (API-1)."""
