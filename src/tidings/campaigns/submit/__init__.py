"""Submit strategies: the two ways of reaching a provider (SPEC SND-12, PRV-2) — one call per
recipient (SMTP, local capture) or one call per batch (a batch HTTP API). They build messages
and return typed outcomes; the `send_batch` job writes them."""
