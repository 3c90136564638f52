"""The admin web UI (SPEC UI-1): server-rendered pages at /admin over the same use cases as the
API, signed in with operator accounts and server-side sessions."""
