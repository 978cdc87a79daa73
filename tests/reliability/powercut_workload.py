"""What runs against the broker while the power-cut chaos test cuts the power, and its checks.

Every worker is a thread with its own connection that stops at the first connection error (the
broker died) and records only what the broker *acknowledged*:

- :class:`NativeProducer`: native protocol, ``acks=all``, batches of 1-20 unique values;
- :class:`IdempotentProducer`: confluent-kafka (Kafka protocol, ``enable.idempotence``), whose
  partitions roll and so write producer-state ``.snapshot`` files;
- :class:`Admin`: creates topics ``pc-new-*`` and deletes some of them again;
- :class:`Committer`: commits ever larger offsets for a group (``__consumer_offsets`` appends).

:func:`check_log` and :func:`check_admin` / :func:`check_commits` compare the restarted broker
with those records: each returns a list of problems and the counts of lost and duplicated
records.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Producer

from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from tests.broker.wire import Wire, fetch_all

__all__ = [
    "Admin",
    "Committer",
    "IdempotentProducer",
    "LogCheck",
    "NativeProducer",
    "check_admin",
    "check_commits",
    "check_log",
]

GROUP = "pc-group"


class _Worker(threading.Thread):
    def __init__(self, port: int, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.rng = random.Random(rng.random())
        self.stop = threading.Event()
        self.errors: list[str] = []

    def connect(self) -> Wire | None:
        try:
            return Wire(self.port, timeout_s=30)
        except OSError:
            return None


class NativeProducer(_Worker):
    """acks=all batches to one partition; ``keys``: None one key, n keys drawn from n."""

    def __init__(
        self, port: int, rng: random.Random, topic: str, partition: int, tag: str, keys: int = 0
    ) -> None:
        super().__init__(port, rng)
        self.topic, self.partition, self.tag, self.keys = topic, partition, tag, keys
        self.acked: dict[int, tuple[bytes, bytes]] = {}

    def run(self) -> None:
        wire = self.connect()
        if wire is None:
            return
        with wire:
            seq = 0
            while not self.stop.is_set():
                count = self.rng.randint(1, 20)
                values = [f"{self.tag}-{seq + i}".encode() for i in range(count)]
                seq += count
                keys = [
                    b"k%d" % self.rng.randrange(self.keys) if self.keys else b"k" for _ in values
                ]
                data = encode_batch(list(zip(keys, values, strict=True)))
                try:
                    result = wire.produce(self.topic, self.partition, data, acks=m.ACKS_ALL)
                except (OSError, EOFError):
                    return
                if result.error_code:
                    self.errors.append(f"{self.topic}-{self.partition}: error {result.error_code}")
                    return
                for i, record in enumerate(zip(keys, values, strict=True)):
                    self.acked[result.base_offset + i] = record


class IdempotentProducer(_Worker):
    """confluent-kafka with ``enable.idempotence``; records each delivered value's offset."""

    def __init__(self, port: int, rng: random.Random, topic: str, tag: str) -> None:
        super().__init__(port, rng)
        self.topic, self.tag = topic, tag
        self.acked: dict[int, dict[int, bytes]] = {}  # partition -> offset -> value

    def _report(self, err: KafkaError | None, msg: object) -> None:
        if err is None:
            self.acked.setdefault(msg.partition(), {})[msg.offset()] = msg.value()  # type: ignore[attr-defined]

    def run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{self.port}",
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 60_000,
                "reconnect.backoff.max.ms": 200,
            }
        )
        seq = 0
        while not self.stop.is_set():
            try:
                producer.produce(self.topic, f"{self.tag}-{seq}".encode(), key=b"%d" % (seq % 7))
                seq += 1
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
            if seq % 200 == 0:
                producer.poll(0.01)
        producer.purge()  # nothing is retried against the restarted broker
        producer.flush(10)


class Admin(_Worker):
    """Creates topics ``pc-new-<tag>-<n>`` one after another; deletes every third again."""

    def __init__(self, port: int, rng: random.Random, tag: str) -> None:
        super().__init__(port, rng)
        self.tag = tag
        self.created: list[str] = []  # acknowledged creations
        self.deleted: list[str] = []  # acknowledged deletions
        self.deleting: list[str] = []  # deletions sent (acknowledged or not)

    def run(self) -> None:
        wire = self.connect()
        if wire is None:
            return
        with wire:
            n = 0
            while not self.stop.is_set():
                name = f"pc-new-{self.tag}-{n}"
                n += 1
                try:
                    request = m.CreatableTopic(name=name, num_partitions=1, configs={})
                    response = wire.call(m.CreateTopicsRequest(correlation_id=0, topics=[request]))
                    if response.topics[0].error_code == 0:
                        self.created.append(name)
                    if n % 3 == 0 and self.created:
                        doomed = self.created[-2] if len(self.created) > 1 else self.created[-1]
                        self.deleting.append(doomed)
                        response = wire.call(
                            m.DeleteTopicsRequest(correlation_id=0, topic_names=[doomed])
                        )
                        if response.topics[0].error_code == 0:
                            self.deleted.append(doomed)
                except (OSError, EOFError):
                    return


class Committer(_Worker):
    """Commits offsets 1, 2, 3, ... for ``GROUP`` on ``topic`` partition 0."""

    def __init__(self, port: int, rng: random.Random, topic: str, start: int) -> None:
        super().__init__(port, rng)
        self.topic = topic
        self.next_offset = start
        self.acked = -1  # the last acknowledged committed offset
        self.sent = -1  # the last one sent

    def run(self) -> None:
        wire = self.connect()
        if wire is None:
            return
        with wire:
            while not self.stop.is_set():
                offset = self.next_offset
                self.sent = offset
                partition = m.OffsetCommitPartition(partition_index=0, committed_offset=offset)
                request = m.OffsetCommitRequest(
                    correlation_id=0,
                    group_id=GROUP,
                    topics=[m.OffsetCommitTopic(name=self.topic, partitions=[partition])],
                )
                try:
                    response = wire.call(request)
                except (OSError, EOFError):
                    return
                code = response.topics[0].partitions[0].error_code
                if code:
                    self.errors.append(f"commit {offset}: error {code}")
                    return
                self.acked = offset
                self.next_offset += 1


@dataclass
class LogCheck:
    problems: list[str] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0


def check_log(
    wire: Wire,
    topic: str,
    partition: int,
    acked: dict[int, bytes],
    *,
    compacted: bool = False,
    keys: dict[int, bytes] | None = None,
) -> LogCheck:
    """Every acknowledged value at its offset, exactly once. With ``compacted``: offsets only
    increase and every key's latest acknowledged record (or a later one of it) is there.
    Records below the log start (retention) are not asked for."""
    check = LogCheck()
    name = f"{topic}-{partition}"
    for attempt in range(5):  # retention may move the log start between the two requests
        try:
            log_start = int(wire.list_offset(topic, partition, -2).offset)
            records = fetch_all(wire, topic, partition, log_start)
            break
        except (AssertionError, OSError, EOFError) as exc:
            if attempt == 4 or "error_code=1," not in str(exc):  # OFFSET_OUT_OF_RANGE
                check.problems.append(f"{name}: cannot read: {exc}")
                check.lost = len(acked)
                return check
    values = [r.value for r in records]
    check.duplicated = len(values) - len(set(values))
    by_offset = {r.offset: r.value for r in records}
    if not compacted:
        expected = (
            list(range(records[0].offset, records[0].offset + len(records))) if records else []
        )
        if [r.offset for r in records] != expected:
            check.problems.append(f"{name}: offsets not dense")
        wanted = {o: v for o, v in acked.items() if o >= log_start}
        check.lost = sum(1 for o, v in wanted.items() if by_offset.get(o) != v)
    else:
        latest_in_log = {r.key: r.offset for r in records}
        latest_acked: dict[bytes, int] = {}
        for offset in sorted(acked):
            latest_acked[(keys or {})[offset]] = offset
        check.lost = sum(1 for k, o in latest_acked.items() if latest_in_log.get(k, -1) < o)
        changed = [o for o in acked if o in by_offset and by_offset[o] != acked[o]]
        check.lost += len(changed)
    if check.lost:
        check.problems.append(f"{name}: {check.lost} acknowledged records lost")
    if check.duplicated:
        check.problems.append(f"{name}: {check.duplicated} values appear twice")
    return check


def check_admin(wire: Wire, created: set[str], deleted: set[str], deleting: set[str]) -> list[str]:
    """Acknowledged creations exist (unless a deletion of them was sent: acknowledged or not, it
    may have happened); acknowledged deletions stay deleted."""
    problems = []
    topics = sorted(created | deleted)
    if not topics:
        return problems
    response = wire.metadata(topics, auto_create=False)
    codes = {t.name: t.error_code for t in response.topics}
    for topic in topics:
        exists = codes.get(topic) == 0
        if topic in deleted and exists:
            problems.append(f"topic {topic}: its deletion was acknowledged, it is back")
        elif topic not in deleting and not exists:
            problems.append(f"topic {topic}: its creation was acknowledged, it is gone")
    return problems


def check_commits(wire: Wire, topic: str, acked: int, sent: int) -> list[str]:
    """The group's committed offset is the last acknowledged one (or the one sent after it)."""
    if acked < 0:
        return []
    response = wire.call(
        m.OffsetFetchRequest(
            correlation_id=0,
            group_id=GROUP,
            topics=[m.OffsetFetchTopic(name=topic, partition_indexes=[0])],
        )
    )
    committed = int(response.topics[0].partitions[0].committed_offset)
    if not acked <= committed <= sent:
        return [f"group {GROUP}: committed {committed}, acknowledged {acked} (sent {sent})"]
    return []
