"""Delivery: email providers (SMTP, batch HTTP, local capture), webhooks and the SSRF guard."""
