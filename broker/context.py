"""The state every request handler shares: config, logs, group commit, wake-ups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from odradek.broker.config import BrokerConfig, Listener
from odradek.broker.durability import GroupCommit
from odradek.storage.errors import is_resource_exhaustion
from odradek.storage.log import Log
from odradek.storage.manager import LogManager

if TYPE_CHECKING:
    from odradek.broker.groups.api import GroupApi

__all__ = ["BrokerContext"]


class BrokerContext:
    """Shared by the connections of one running broker (one event loop)."""

    def __init__(self, config: BrokerConfig, manager: LogManager, log: Any) -> None:
        self.config = config
        self.manager = manager
        self.log = log  # a structlog logger
        self.node_id = config.node_id
        self.advertised_listener: Listener = config.advertised_listener
        self.group_commit = GroupCommit(on_error=self.storage_failed)
        # Serializes topic creation/deletion/alteration, which run in worker threads.
        self.admin_lock = anyio.Lock()
        self._data_arrived = anyio.Event()
        self._data_waited_on = False  # a fetch holds _data_arrived: the next append sets it
        self._checkpoint_lock = anyio.Lock()
        self.stopping = False  # graceful shutdown began: long polls answer at once
        self.groups: GroupApi | None = None  # the group coordinator, set by the server

    def begin_shutdown(self) -> None:
        """Graceful shutdown: every waiting fetch answers now with what it has."""
        self.stopping = True
        self.notify_data()

    def notify_data(self) -> None:
        """Wake every long-polling fetch (called after appends and topic deletions); free
        when no fetch is waiting (the event is only replaced once someone took it)."""
        if self._data_waited_on:
            self._data_waited_on = False
            self._data_arrived.set()
            self._data_arrived = anyio.Event()

    def data_event(self) -> anyio.Event:
        """The event the next :meth:`notify_data` sets."""
        self._data_waited_on = True
        return self._data_arrived

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
            log_dir = self.manager.log_dir_of(log.topic, log.partition)
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
