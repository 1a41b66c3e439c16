"""The SQL store over SQLAlchemy: SQLite and PostgreSQL (see schema.py)."""

from dovecote.store.sql.adapter import SqlPersistenceAdapter

__all__ = ["SqlPersistenceAdapter"]
