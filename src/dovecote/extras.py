"""The optional extras (pyproject.toml) and the one-line message that names the extra to
install when a feature finds its library missing. Imports nothing of dovecote's: any layer
may use it."""

from __future__ import annotations

EXTRA_OF_MODULE = {
    "pyspark": "spark",
    "pyarrow": "spark",
    "pandas": "spark",
    "numpy": "spark",
    "psycopg": "postgresql",
    "plyvel": "leveldb",
    "kazoo": "replicated",
}


def missing_extra(exc: ImportError, feature: str) -> str | None:
    """``feature needs X, which is not installed: pip install "dovecote[extra]"`` when
    ``exc`` is a library of an extra missing; None for any other import error."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    return f'{feature} needs {top}, which is not installed: pip install "dovecote[{extra}]"'


def sql_driver_problem(url: str) -> str | None:
    """What is missing for SQLAlchemy to reach ``url``'s database, in a line (None: the
    driver imports; any other fault of the URL is reported when the store opens)."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
        dialect = parsed.get_dialect()
    except Exception:  # a malformed URL or unknown dialect: the store's own error says it
        return None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        where = f"store.url {parsed.render_as_string(hide_password=True)}"
        return missing_extra(exc, where) or f"{where}: {exc}"
    return None
