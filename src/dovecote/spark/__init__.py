"""dovecote in Spark pipelines: ``register(spark)`` makes ``format("dovecote")`` available
for streaming and batch reads and writes (dovecote.spark.source has the details)."""

from __future__ import annotations

from typing import Any

from dovecote.spark.source import DovecoteDataSource


def register(spark: Any) -> None:
    spark.dataSource.register(DovecoteDataSource)


__all__ = ["DovecoteDataSource", "register"]
