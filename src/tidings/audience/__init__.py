"""Audience use cases: subscribe, confirm, unsubscribe, preferences, admin, import/export."""
