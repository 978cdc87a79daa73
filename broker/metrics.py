"""The broker's metrics, in Prometheus' text exposition format (docs/operations.md, "Metrics").

Two kinds, so that the data path pays almost nothing:

1. **Counted on the data path** — per request or per batch, never per record — in plain ints
   and lists owned by :class:`BrokerMetrics`: records and bytes in per topic, bytes out per
   topic, each request's latency per protocol and API, each group-commit fsync round's
   latency, connections refused, retention deletions, cleaner passes. A histogram is a list of
   per-bucket counts found with one ``bisect`` (C code), a sum and a count; its cumulative
   form is built only when scraped. Everything is updated from the event loop's thread (the
   cleaner's figures too: they are added when a pass returns to the loop), so nothing locks.
2. **Read when scraped** from the broker's own state by :class:`BrokerCollector`: per
   partition its log start and end offsets, size on disk and segment count; per consumer group
   its state, members, committed offsets and lag; open connections; requests waiting for an
   fsync or a long poll; offline log dirs; and the process (prometheus_client's
   ``ProcessCollector``: CPU, RSS, open descriptors).

prometheus_client formats the text (``generate_latest``); nothing here writes the format. A
scrape runs on the event loop (the endpoint, :mod:`odradek.broker.metrics_http`, is a task of
the server), so it reads a consistent moment of the broker's state without a lock, and costs the
loop the time to walk partitions and groups (about 1 µs per partition).

Records out are not counted: a Fetch sends batch bytes from the segment file unparsed (zero
copy) and may end inside a batch, so the broker does not know how many records it sent —
Kafka's broker does not count them either (it has ``BytesOutPerSec`` only). Consumers'
progress shows as group lag.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from odradek.storage.cleaner.plan import cleanable_log

if TYPE_CHECKING:
    from odradek.broker.context import BrokerContext
    from odradek.broker.groups.api import GroupApi
    from odradek.broker.server import Server

__all__ = ["BrokerCollector", "BrokerMetrics", "Histogram", "registry_for"]

# Upper bounds, in seconds (Kafka's request-time percentiles live in this range).
REQUEST_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)  # fmt: skip
FSYNC_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0)  # fmt: skip


class Histogram:
    """Counts of observations per bucket (``bounds`` ascending, + one for +Inf), their sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        """``[(le, count of observations <= le), ..., ("+Inf", total)]``."""
        out, running = [], 0
        for bound, count in zip((*map(repr, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


class BrokerMetrics:
    """What the data path counts (module docstring, kind 1). Event-loop thread only."""

    def __init__(self) -> None:
        self.records_in: dict[str, int] = {}  # per topic
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.requests: dict[tuple[str, str], Histogram] = {}  # (protocol, api) -> latency
        self.fsync = Histogram(FSYNC_BUCKETS_S)
        self.connections_refused = 0
        self.retention_segments_deleted = 0
        self.retention_bytes_deleted = 0
        self.cleaner_passes = 0
        self.cleaner_bytes_read = 0
        self.cleaner_bytes_removed = 0

    def appended(self, topic: str, records: int, size_bytes: int) -> None:
        """One batch (or several, in one section) appended to ``topic``."""
        self.records_in[topic] = self.records_in.get(topic, 0) + records
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size_bytes

    def fetched(self, topic: str, size_bytes: int) -> None:
        self.bytes_out[topic] = self.bytes_out.get(topic, 0) + size_bytes

    def latency(self, protocol: str, api: str) -> Histogram:
        """The request-latency histogram of ``api`` over ``protocol`` (made on first use).
        Sessions keep the one of each API they serve, so a request costs one ``observe``:
        the time from reading it to sending its answer (or, for ``acks=0``, to handling it)."""
        histogram = self.requests.get((protocol, api))
        if histogram is None:
            histogram = self.requests[(protocol, api)] = Histogram(REQUEST_BUCKETS_S)
        return histogram

    def topic_deleted(self, topic: str) -> None:
        """Forget a deleted topic's series (a re-created topic starts from zero)."""
        for per_topic in (self.records_in, self.bytes_in, self.bytes_out):
            per_topic.pop(topic, None)


class BrokerCollector:
    """A prometheus_client collector: the counted figures and the broker's state, per scrape."""

    def __init__(self, server: Server, metrics: BrokerMetrics) -> None:
        self.server = server
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self._counted()
        ctx = self.server.context
        if ctx is None:  # still starting
            return
        yield from self._partitions()
        yield from self._groups(ctx.groups)
        yield from self._broker(ctx)

    def _counted(self) -> Iterator[Metric]:
        mx = self.metrics
        for name, per_topic, what in (
            ("odradek_topic_records_in", mx.records_in, "Records appended, per topic."),
            ("odradek_topic_bytes_in", mx.bytes_in, "Bytes appended, per topic."),
            ("odradek_topic_bytes_out", mx.bytes_out, "Bytes sent to fetches, per topic."),
        ):
            family = CounterMetricFamily(name, what, labels=["topic"])
            for topic, value in sorted(per_topic.items()):
                family.add_metric([topic], value)
            yield family
        requests = HistogramMetricFamily(
            "odradek_request_duration_seconds",
            "Time from reading a request to sending its answer, per protocol and API "
            "(_count: requests served).",
            labels=["protocol", "api"],
        )
        for (protocol, api), histogram in sorted(mx.requests.items()):
            requests.add_metric([protocol, api], histogram.cumulative(), histogram.sum)
        yield requests
        fsync = HistogramMetricFamily(
            "odradek_fsync_round_duration_seconds",
            "Duration of each group-commit round: the fsyncs that make acks=all appends durable.",
        )
        fsync.add_metric([], mx.fsync.cumulative(), mx.fsync.sum)
        yield fsync
        for name, value, what in (
            ("odradek_connections_refused", mx.connections_refused,
             "Connections refused at max.connections."),
            ("odradek_retention_deleted_segments", mx.retention_segments_deleted,
             "Segments deleted by retention (time, size, or DeleteRecords' log start)."),
            ("odradek_retention_deleted_bytes", mx.retention_bytes_deleted,
             "Bytes of the segments deleted by retention."),
            ("odradek_cleaner_passes", mx.cleaner_passes, "Log cleaner (compaction) passes."),
            ("odradek_cleaner_read_bytes", mx.cleaner_bytes_read,
             "Bytes the log cleaner read."),
            ("odradek_cleaner_removed_bytes", mx.cleaner_bytes_removed,
             "Bytes the log cleaner removed (size before - size after)."),
        ):  # fmt: skip
            yield CounterMetricFamily(name, what, value=value)

    def _partitions(self) -> Iterator[Metric]:
        manager = self.server.manager
        now_ms = manager.clock_ms()
        labels = ["topic", "partition"]
        start = GaugeMetricFamily(
            "odradek_partition_log_start_offset", "First offset kept.", labels=labels
        )
        end = GaugeMetricFamily(
            "odradek_partition_log_end_offset", "Next offset to be written.", labels=labels
        )
        size = GaugeMetricFamily(
            "odradek_partition_size_bytes", "Bytes of the partition's segments.", labels=labels
        )
        segments = GaugeMetricFamily(
            "odradek_partition_segments", "Segments of the partition.", labels=labels
        )
        dirty = GaugeMetricFamily(
            "odradek_partition_dirty_ratio",
            "Compacted partitions: bytes not yet cleaned / all bytes (the cleaner's ratio).",
            labels=labels,
        )
        for (topic, partition), log in sorted(manager.partitions.logs.items()):
            key = [topic, str(partition)]
            start.add_metric(key, log.log_start_offset)
            end.add_metric(key, log.next_offset)
            size.add_metric(key, log.size_bytes)
            segments.add_metric(key, len(log.segments))
            if log.config.compact:
                dirty.add_metric(key, cleanable_log(log, now_ms).cleanable_ratio)
        yield from (start, end, size, segments, dirty)
        offline = GaugeMetricFamily(
            "odradek_log_dir_offline", "1 if the log dir is offline (I/O error).", labels=["dir"]
        )
        for log_dir in manager.log_dirs:
            offline.add_metric([str(log_dir)], int(log_dir in manager.offline_dirs))
        yield offline

    def _groups(self, groups: GroupApi | None) -> Iterator[Metric]:
        if groups is None:
            return
        state = GaugeMetricFamily(
            "odradek_group_state", "1 for the group's current state.", labels=["group", "state"]
        )
        members = GaugeMetricFamily(
            "odradek_group_members", "Members of the group.", labels=["group"]
        )
        for group_id, group in sorted(groups.coordinator.groups.items()):
            state.add_metric([group_id, group.state.value], 1)
            members.add_metric([group_id], len(group.members))
        committed = GaugeMetricFamily(
            "odradek_group_committed_offset",
            "The group's committed offset (the next offset to read).",
            labels=["group", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "odradek_group_lag",
            "Log end offset - committed offset (0 when the commit is at or past the end).",
            labels=["group", "topic", "partition"],
        )
        logs = self.server.manager.partitions.logs
        for group_id in sorted(groups.store.groups()):
            for (topic, partition), entry in sorted(groups.store.committed(group_id).items()):
                key = [group_id, topic, str(partition)]
                committed.add_metric(key, entry.value.offset)
                log = logs.get((topic, partition))
                if log is not None:
                    lag.add_metric(key, max(log.next_offset - entry.value.offset, 0))
        yield from (state, members, committed, lag)

    def _broker(self, context: BrokerContext) -> Iterator[Metric]:
        server = self.server
        connections = GaugeMetricFamily(
            "odradek_connections", "Open client connections, per protocol.", labels=["protocol"]
        )
        by_protocol: dict[str, int] = {"kafka": 0, "native": 0}
        for conn in server.connections:
            protocol = conn.protocol or "unknown"
            by_protocol[protocol] = by_protocol.get(protocol, 0) + 1
        for protocol, count in sorted(by_protocol.items()):
            connections.add_metric([protocol], count)
        yield connections
        yield GaugeMetricFamily(
            "odradek_produce_waiting_fsync",
            "acks=all produce requests waiting for their fsync.",
            value=context.group_commit.waiting_requests,
        )
        yield GaugeMetricFamily(
            "odradek_fetch_waiting",
            "Fetch requests waiting in a long poll.",
            value=context.waiting_fetches(),
        )


def registry_for(server: Server, metrics: BrokerMetrics) -> CollectorRegistry:
    """A registry of this broker's collectors and the process collector (never the global
    default registry: several brokers may run in one test process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(server, metrics))
    ProcessCollector(registry=registry)
    return registry
