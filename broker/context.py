"""The state every request handler shares: config, logs, group commit, wake-ups.

Wake-ups of long-polling fetches are per partition: a fetch that must wait registers one
:class:`Waiter` under each partition it reads (:meth:`BrokerContext.wait_for_data`) in the same
event-loop turn as its read (every append runs on the loop, so none can slip in between and
be missed); an append to a partition wakes the waiters of that partition only
(:meth:`BrokerContext.notify_data`), so its cost is the number of fetches waiting on it, not
on the whole broker. Events that concern every waiter (a topic deletion,
retention moving log start offsets, a graceful shutdown) use :meth:`BrokerContext.notify_all`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from odradek.broker.config import BrokerConfig, Listener
from odradek.broker.durability import GroupCommit
from odradek.broker.metrics import BrokerMetrics
from odradek.storage.errors import is_resource_exhaustion
from odradek.storage.log import Log
from odradek.storage.manager import LogManager

if TYPE_CHECKING:
    from odradek.broker.groups.api import GroupApi
    from odradek.broker.security.authorizer import Authorizer
    from odradek.broker.security.sasl import SaslState

__all__ = ["BrokerContext", "Waiter"]

TopicPartition = tuple[str, int]


class Waiter:
    """One waiting request's wake-up: set once, by whichever registered partition grew."""

    __slots__ = ("event", "partitions")

    def __init__(self, partitions: tuple[TopicPartition, ...]) -> None:
        self.event = anyio.Event()
        self.partitions = partitions

    async def wait(self) -> None:
        await self.event.wait()


class BrokerContext:
    """Shared by the connections of one running broker (one event loop)."""

    def __init__(
        self,
        config: BrokerConfig,
        manager: LogManager,
        log: Any,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        self.config = config
        self.manager = manager
        self.log = log  # a structlog logger
        self.metrics = metrics  # None: nothing is counted (no metrics endpoint)
        self.node_id = config.node_id
        self.advertised_listener: Listener = config.advertised_listener
        self.group_commit = GroupCommit(
            on_error=self.storage_failed,
            on_round=None if metrics is None else metrics.fsync.observe,
        )
        # Serializes topic creation/deletion/alteration, which run in worker threads.
        self.admin_lock = anyio.Lock()
        # partition -> the waiters registered on it (a dict used as an ordered set)
        self._waiters: dict[TopicPartition, dict[Waiter, None]] = {}
        self._shutdown = anyio.Event()  # set by begin_shutdown and, re-armed, by notify_all
        self._checkpoint_lock = anyio.Lock()
        self.stopping = False  # graceful shutdown began: long polls answer at once
        self.groups: GroupApi | None = None  # the group coordinator, set by the server
        self.security: SaslState | None = None  # credentials and failure delays, likewise
        self.authorizer: Authorizer | None = None  # ACLs, if authorizer.class.name is set

    def begin_shutdown(self) -> None:
        """Graceful shutdown: every waiting fetch answers now with what it has."""
        self.stopping = True
        self.notify_all()

    def wait_for_data(self, partitions: Iterable[TopicPartition]) -> Waiter:
        """Register a waiter woken by the next append to any of ``partitions`` (or by
        :meth:`notify_all`). Register with no await since reading them; always
        :meth:`forget` it."""
        waiter = Waiter(tuple(partitions))
        for tp in waiter.partitions:
            self._waiters.setdefault(tp, {})[waiter] = None
        return waiter

    def waiting_fetches(self) -> int:
        """Requests waiting in a long poll now (each counted once, whatever it reads)."""
        return len({w for registered in self._waiters.values() for w in registered})

    def forget(self, waiter: Waiter) -> None:
        """Unregister ``waiter`` (it was woken, or its request ended)."""
        for tp in waiter.partitions:
            registered = self._waiters.get(tp)
            if registered is not None:
                registered.pop(waiter, None)
                if not registered:
                    del self._waiters[tp]

    def notify_data(self, topic: str, partition: int) -> None:
        """``topic``-``partition`` grew: wake the requests waiting on it, and no other
        (called after appends; free when nobody waits on that partition)."""
        registered = self._waiters.pop((topic, partition), None)
        if registered:
            for waiter in registered:
                waiter.event.set()

    def notify_all(self) -> None:
        """Wake every waiting request (topic deletion, retention, shutdown): each re-reads
        its partitions and answers or waits again."""
        waiters = {w: None for registered in self._waiters.values() for w in registered}
        self._waiters.clear()
        for waiter in waiters:
            waiter.event.set()
        self._shutdown.set()
        if not self.stopping:
            self._shutdown = anyio.Event()

    def data_event(self) -> anyio.Event:
        """An event :meth:`notify_all` (and a graceful shutdown) sets: for requests that wait
        on something else (a rebalance) but must notice a shutdown."""
        return self._shutdown

    async def checkpoint(self) -> None:
        """Write the offset checkpoints of every log dir (in a worker thread, one at a time)."""
        async with self._checkpoint_lock:
            await anyio.to_thread.run_sync(self.manager.checkpoint)

    def storage_failed(self, log: Log, error: OSError) -> None:
        """An I/O error on ``log``: take its log dir offline (as Kafka does), say so.

        Running out of file descriptors or memory is not a disk failure: the request fails,
        the dir stays online."""
        if is_resource_exhaustion(error):
            self.log.error(
                "out of resources", topic=log.topic, partition=log.partition, error=str(error)
            )
            return
        try:
            log_dir = self.manager.partitions.log_dir_of[(log.topic, log.partition)]
        except KeyError:
            return  # already offline
        self.log.error(
            "log dir offline after I/O error",
            log_dir=str(log_dir),
            topic=log.topic,
            partition=log.partition,
            error=str(error),
        )
        self.manager.mark_dir_offline(log_dir, str(error))
