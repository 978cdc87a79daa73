"""Option validation (every error names its option) and the pure planning rules."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.spark.metadata import DataLossError, discover, report_data_loss, resolve
from odradek.spark.option_values import EARLIEST, LATEST, OdradekOptionError
from odradek.spark.options import ReadOptions, Subscription, WriteOptions
from odradek.spark.planning import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)


def read(streaming: bool = False, **options: str) -> ReadOptions:
    return ReadOptions.parse(options, streaming=streaming)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "subscribe"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "subscribe/assign"),
        ({"subscribe": " , "}, "subscribe"),
        ({"subscribePattern": "("}, "subscribePattern"),
        ({"assign": "{bad json"}, "assign"),
        ({"assign": '{"a": 0}'}, "assign"),
        ({"subscribe": "a", "startingOffsets": "{bad"}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": "middle"}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "startingOffsets"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "endingOffsets"),
        ({"subscribe": "a", "startingTimestamp": "-5"}, "startingTimestamp"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions"),
        ({"subscribe": "a", "minPartitions": "many"}, "minPartitions"),
        ({"subscribe": "a", "maxRecordsPerPartition": "0"}, "maxRecordsPerPartition"),
        ({"subscribe": "a", "includeHeaders": "yes"}, "includeHeaders"),
        ({"subscribe": "a", "failOnDataLoss": "1"}, "failOnDataLoss"),
        ({"subscribe": "a", "bootstrap.servers": "nohost"}, "bootstrap.servers"),
    ],
)
def test_bad_batch_options_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(OdradekOptionError) as info:
        read(**options)
    assert info.value.option == named
    assert str(info.value).startswith(f"option '{named}'")


def test_streaming_only_rules() -> None:
    with pytest.raises(OdradekOptionError, match="maxOffsetsPerTrigger"):
        read(streaming=True, subscribe="a", maxOffsetsPerTrigger="-1")
    with pytest.raises(OdradekOptionError, match="endingOffsets"):
        read(streaming=True, subscribe="a", endingOffsets="latest")
    options = read(streaming=True, subscribe="a", maxOffsetsPerTrigger="10")
    assert options.max_offsets_per_trigger == 10
    assert options.starting.default == LATEST  # streaming default
    assert read(subscribe="a").starting.default == EARLIEST  # batch default


def test_option_keys_are_case_insensitive_as_spark_passes_them() -> None:
    options = ReadOptions.parse(
        {"subscribepattern": "p.*", "startingoffsets": '{"p1":{"0":5}}', "includeheaders": "TRUE"},
        streaming=False,
    )
    assert options.subscription == Subscription("subscribePattern", pattern="p.*")
    assert options.starting.offsets == {("p1", 0): 5}
    assert options.include_headers


def test_timestamp_wins_over_offsets() -> None:
    options = read(subscribe="a", startingOffsets="earliest", startingTimestamp="1000")
    assert options.starting.option == "startingTimestamp" and options.starting.timestamp == 1000


def test_write_options() -> None:
    assert WriteOptions.parse({"topic": "t", "kafka.acks": "1"}).acks == 1
    with pytest.raises(OdradekOptionError, match="'acks'"):
        WriteOptions.parse({"acks": "2"})
    with pytest.raises(OdradekOptionError, match=r"'compression.type'"):
        WriteOptions.parse({"compression.type": "brotli"})
    with pytest.raises(OdradekOptionError, match=r"'linger.ms'"):
        WriteOptions.parse({"linger.ms": "-1"})


def test_kafka_prefixed_properties_become_client_options() -> None:
    """As Spark's Kafka source passes ``kafka.`` options to its clients: the security
    properties reach every client the source makes; one it does not know is named."""
    security = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'x.ScramLoginModule required username="u" password="p";',
    }
    expected = (
        ("sasl_mechanism", "SCRAM-SHA-512"),
        ("sasl_plain_password", "p"),
        ("sasl_plain_username", "u"),
        ("security_protocol", "SASL_SSL"),
    )
    assert read(subscribe="a", **security).client_options == expected
    written = WriteOptions.parse({"topic": "t", "kafka.acks": "1", **security})
    assert written.client_options == expected and written.acks == 1
    assert read(subscribe="a", **{"kafka.fetch.max.bytes": "4096"}).fetch_max_bytes == 4096
    with pytest.raises(OdradekOptionError, match=r"'kafka\.ssl\.truststore\.locaton'"):
        read(subscribe="a", **{"kafka.ssl.truststore.locaton": "ca.pem"})
    with pytest.raises(OdradekOptionError, match=r"'kafka\.ssl\.keystore\.type'.*PEM"):
        WriteOptions.parse({"kafka.ssl.keystore.type": "PKCS12"})


def test_pattern_is_a_full_match_and_skips_internal_topics() -> None:
    sub = Subscription("subscribePattern", pattern="page.*")
    assert sub.matches("page-views") and not sub.matches("my-page-views")
    assert not Subscription("subscribePattern", pattern=".*").matches("__consumer_offsets")


class FakeCluster:
    """A cluster with fixed log start / end offsets and records at known timestamps."""

    def __init__(self) -> None:
        self.partitions = {"a": 2, "b": 1}
        self.earliest = {("a", 0): 0, ("a", 1): 5, ("b", 0): 0}
        self.latest = {("a", 0): 10, ("a", 1): 20, ("b", 0): 3}
        self.timestamps = {("a", 0): [100 * i for i in range(10)], ("a", 1): [], ("b", 0): []}

    def topics(self) -> dict[str, int]:
        return dict(self.partitions)

    def list_offsets(self, query: dict) -> dict:
        out = {}
        for tp, ts in query.items():
            if ts == EARLIEST:
                out[tp] = self.earliest[tp]
            elif ts == LATEST:
                out[tp] = self.latest[tp]
            else:
                found = [i for i, t in enumerate(self.timestamps[tp]) if t >= ts]
                out[tp] = found[0] if found else None
        return out

    def close(self) -> None:
        pass


def test_discover_and_resolve() -> None:
    cluster = FakeCluster()
    sub = Subscription.parse({"subscribe": "a,b"})
    tps = discover(cluster, sub, strict=True)
    assert tps == [("a", 0), ("a", 1), ("b", 0)]
    with pytest.raises(OdradekOptionError, match=r"subscribe.*unknown topic c"):
        discover(cluster, Subscription.parse({"subscribe": "a,c"}), strict=True)
    with pytest.raises(OdradekOptionError, match=r"assign.*a-7"):
        discover(cluster, Subscription.parse({"assign": '{"a":[7]}'}), strict=True)
    spec = read(True, subscribe="a,b", startingOffsets='{"a":{"0":3,"1":-2},"b":{"0":-1}}')
    spec = spec.starting
    assert resolve(cluster, spec, tps) == {("a", 0): 3, ("a", 1): 5, ("b", 0): 3}
    partial = read(subscribe="a", startingOffsets='{"a":{"0":3}}').starting
    with pytest.raises(OdradekOptionError, match=r"startingOffsets.*missing a-1"):
        resolve(cluster, partial, [("a", 0), ("a", 1)])
    by_ts = read(subscribe="a", startingTimestamp="250").starting
    assert resolve(cluster, by_ts, [("a", 0), ("a", 1)]) == {("a", 0): 3, ("a", 1): 20}
    with pytest.raises(OdradekOptionError, match=r"startingTimestamp.*a-1"):
        resolve(cluster, by_ts, [("a", 0), ("a", 1)], no_match="error")


def test_report_data_loss() -> None:
    with pytest.raises(DataLossError, match="failOnDataLoss=false"):
        report_data_loss(True, "gone.")
    report_data_loss(False, "gone.")  # only a warning


def test_split_ranges_follows_sparks_proportional_rule() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 300), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    split = split_ranges(ranges, 8)
    assert [r.partition for r in split] == [0, 0, 1, 1, 1, 1, 1, 1]
    assert [(r.from_offset, r.until_offset) for r in split if r.partition == 0] == [
        (0, 50),
        (50, 100),
    ]
    assert sum(r.size for r in split) == 400


def test_max_records_per_partition_cuts_large_ranges_first() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10)]
    split = split_ranges(ranges, None, 300)
    assert [(r.partition, r.from_offset, r.until_offset) for r in split] == [
        (0, 0, 250),
        (0, 250, 500),
        (0, 500, 750),
        (0, 750, 1000),
        (1, 0, 10),
    ]
    # minPartitions then applies to the pieces, as in Spark: each 250-offset piece gets
    # round(250 * 10 / 1010) = 2, the 10-offset range 1 (at least one): 9, "about" 10
    assert len(split_ranges(ranges, 10, 300)) == 9


def test_a_single_partition_topic_reads_in_parallel_when_asked() -> None:
    one = [OffsetRange("t", 0, 0, 1_000_000)]
    assert split_ranges(one, None) == one  # Spark's default: one task per topic-partition
    assert len(split_ranges(one, 2)) == 2
    assert len(split_ranges(one, None, 250_000)) == 4


@given(
    st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=6),
    st.integers(min_value=1, max_value=50),
    st.one_of(st.none(), st.integers(min_value=1, max_value=400)),
)
def test_split_ranges_covers_each_range_exactly(
    sizes: list[int], min_partitions: int, max_records: int | None
) -> None:
    ranges = [OffsetRange("t", p, 10, 10 + size) for p, size in enumerate(sizes)]
    split = split_ranges(ranges, min_partitions, max_records)
    if max_records is not None:
        assert all(r.size <= max_records for r in split)
    for p, size in enumerate(sizes):
        pieces = [r for r in split if r.partition == p]
        assert all(r.size > 0 for r in pieces)
        assert sum(r.size for r in pieces) == size
        assert all(a.until_offset == b.from_offset for a, b in itertools.pairwise(pieces))


def test_rate_limit_is_proportional_and_exact() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 50}
    end = {("t", 0): 100, ("t", 1): 300, ("t", 2): 50}
    assert rate_limit(start, end, 40) == {("t", 0): 10, ("t", 1): 30, ("t", 2): 50}
    assert rate_limit(start, end, 1000) == end


@given(
    st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=6),
    st.integers(min_value=1, max_value=2000),
)
def test_rate_limit_takes_exactly_min_of_limit_and_available(sizes: list[int], limit: int) -> None:
    start = {("t", p): 7 for p in range(len(sizes))}
    end = {("t", p): 7 + size for p, size in enumerate(sizes)}
    result = rate_limit(start, end, limit)
    taken = [result[tp] - start[tp] for tp in start]
    assert all(0 <= t <= s for t, s in zip(taken, sizes, strict=True))
    assert sum(taken) == min(limit, sum(sizes))


def test_checkpoint_offsets_json_round_trip() -> None:
    offsets = {("b", 1): 4, ("a", 0): 7, ("a", 10): 1}
    data = offsets_to_json(offsets)
    assert data == {"a": {"0": 7, "10": 1}, "b": {"1": 4}}
    assert offsets_from_json(data) == offsets
