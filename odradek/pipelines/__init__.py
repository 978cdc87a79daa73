"""Spark jobs that ship with odradek, built on the ``odradek`` PySpark data source.

* :mod:`odradek.pipelines.generate` — a page-view event generator (JSON records on
  ``page-views``).
* :mod:`odradek.pipelines.pageviews` — streaming: page views → per-page, per-minute counts
  (event time, watermark) → topic ``page-view-counts`` and Parquet.
* :mod:`odradek.pipelines.export` — batch: a topic's offset or time range → Parquet
  partitioned by date.

Each runs with ``python -m odradek.pipelines.<job> --help`` or through ``spark-submit``.
"""
