"""The HTTP API: public and admin routers, schemas, the error table."""
