"""Storage: SQLAlchemy Core tables, named queries per aggregate, Alembic migrations."""
