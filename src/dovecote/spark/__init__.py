"""dovecote in Spark pipelines: ``register(spark)`` makes ``format("dovecote")`` available
for streaming and batch reads and writes (dovecote.spark.source has the details)."""

from __future__ import annotations

from typing import Any

from dovecote.extras import missing_extra

try:
    from dovecote.spark.source import DovecoteDataSource
except ImportError as exc:
    if (problem := missing_extra(exc, "dovecote.spark")) is None:
        raise
    raise ImportError(problem, name=exc.name) from None


def register(spark: Any) -> None:
    spark.dataSource.register(DovecoteDataSource)


__all__ = ["DovecoteDataSource", "register"]
