"""One face-neutral driver over the client's blocking and async faces, for the shared suite.

A test is written once, as plain blocking code against :class:`Face`; it runs four times:

- ``blocking``: :class:`~odradek.client.Producer`, :class:`~odradek.client.Consumer`,
  :class:`~odradek.client.Admin` called directly;
- ``asyncio``, ``uvloop``, ``trio``: :class:`~odradek.client.AsyncProducer`,
  :class:`~odradek.client.AsyncConsumer`, :class:`~odradek.client.AsyncAdmin` living in an event
  loop of that backend, run by an anyio blocking portal on its own thread. Every coroutine method
  is awaited there through ``portal.call``; plain methods run there too (a trio event may only
  be set from its loop's thread). Async objects are entered and left with ``async with`` in one
  task (``portal.wrap_async_context_manager``), as users are told to.

What differs between the faces only by name is mapped here, and nowhere else: the consumer's
``poll`` is ``getmany``, iteration is ``for`` or ``async for``, a delivery is a
``concurrent.futures.Future`` or an awaitable :class:`~odradek.client.DeliveryHandle`. Anything
else that differs is drift, and the suite is there to find it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from odradek.client import (
    Admin,
    AsyncAdmin,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    ConsumerRecord,
    Producer,
    RecordMetadata,
)

#: face name -> anyio backend and options (``None``: the blocking face)
BACKENDS: dict[str, tuple[str, dict[str, Any]] | None] = {
    "blocking": None,
    "asyncio": ("asyncio", {}),
    "uvloop": ("asyncio", {"use_uvloop": True}),
    "trio": ("trio", {}),
}


class Delivery:
    """The outcome of one ``send``: ``result(timeout_s)`` -> :class:`RecordMetadata` or raises
    the delivery error. ``target`` is the face's own future or handle; ``done()``,
    ``exception()`` (once done) and ``add_done_callback(fn)`` (``fn(target)``) are its own,
    called where users call them (an async face's in its event loop's thread)."""

    def __init__(
        self, wait: Callable[[float], RecordMetadata], target: Any, call: Callable[..., Any]
    ) -> None:
        self._wait = wait
        self.target = target
        self._call = call

    def result(self, timeout_s: float = 10.0) -> RecordMetadata:
        return self._wait(timeout_s)

    def done(self) -> bool:
        return self._call(self.target.done)  # type: ignore[no-any-return]

    def exception(self) -> BaseException | None:
        return self._call(functools.partial(self.target.exception, *self._now))

    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        self._call(functools.partial(self.target.add_done_callback, fn))

    @property
    def _now(self) -> tuple[float, ...]:  # concurrent.futures' exception() waits, by default
        return (0,) if isinstance(self.target, Future) else ()


class _Proxy:
    """Attribute access on an async-face object: its methods (coroutine methods awaited) run
    in the event loop's thread, through the portal."""

    def __init__(self, target: Any, portal: BlockingPortal) -> None:
        self._target = target
        self._portal = portal

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if callable(attr):  # plain methods too: the loop's thread is where users call them
            return lambda *args, **kwargs: self._portal.call(
                functools.partial(attr, *args, **kwargs)
            )
        return attr


class BlockingProducer:
    def __init__(self, producer: Producer) -> None:
        self.target = producer

    def send(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> Delivery:
        future = self.target.send(topic, value, key, **kwargs)
        return Delivery(lambda timeout_s: future.result(timeout_s), future, lambda f: f())

    def flush(self, timeout_s: float | None = None) -> None:
        self.target.flush(timeout_s)

    def partitions_for(self, topic: str) -> set[int]:
        return self.target.partitions_for(topic)


class AsyncProducerDriver(_Proxy):
    def send(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> Delivery:
        handle = self._portal.call(
            functools.partial(self._target.send, topic, value, key, **kwargs)
        )

        async def wait(timeout_s: float) -> RecordMetadata:
            with anyio.fail_after(timeout_s):
                return await handle

        return Delivery(
            lambda timeout_s: self._portal.call(wait, timeout_s), handle, self._portal.call
        )


class BlockingConsumer:
    def __init__(self, consumer: Consumer) -> None:
        self.target = consumer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> dict[Any, Any]:
        return self.target.poll(timeout_ms, max_records)

    def take(self, count: int | None = None) -> list[ConsumerRecord]:
        """Iterate the consumer (``for``): ``count`` records, or until ``consumer_timeout_ms``."""
        return list(itertools.islice(self.target, count))


class AsyncConsumerDriver(_Proxy):
    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> dict[Any, Any]:
        return self._portal.call(
            functools.partial(self._target.getmany, timeout_ms=timeout_ms, max_records=max_records)
        )

    def take(self, count: int | None = None) -> list[ConsumerRecord]:
        async def collect() -> list[ConsumerRecord]:
            got: list[ConsumerRecord] = []
            if count == 0:
                return got
            async for record in self._target:
                got.append(record)
                if len(got) == count:
                    break
            return got

        return self._portal.call(collect)


class Face:
    """One face of the client (``name`` in :data:`BACKENDS`) over one broker."""

    def __init__(self, name: str, bootstrap: str, portal: BlockingPortal | None) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.portal = portal

    def with_bootstrap(self, bootstrap: str) -> Face:
        """The same face (and event loop) for other ``bootstrap_servers``."""
        return Face(self.name, bootstrap, self.portal)

    @property
    def is_async(self) -> bool:
        return self.portal is not None

    def producer(self, **options: Any) -> AbstractContextManager[Any]:
        if self.portal is None:
            return _entered(Producer(self.bootstrap, **options), BlockingProducer)
        return self._async_entered(
            lambda: AsyncProducer(self.bootstrap, **options), AsyncProducerDriver
        )

    def consumer(self, *topics: str, **options: Any) -> AbstractContextManager[Any]:
        def make(cls: type) -> Any:
            return cls(*topics, bootstrap_servers=self.bootstrap, **options)

        if self.portal is None:
            return _entered(make(Consumer), BlockingConsumer)
        return self._async_entered(lambda: make(AsyncConsumer), AsyncConsumerDriver)

    def admin(self, **options: Any) -> AbstractContextManager[Any]:
        if self.portal is None:
            return _entered(Admin(self.bootstrap, **options), lambda admin: admin)
        return self._async_entered(lambda: AsyncAdmin(self.bootstrap, **options), _Proxy)

    def make_producer(self, **options: Any) -> Any:
        """A producer built (and validated) but not started: for configuration errors."""
        cls = AsyncProducer if self.is_async else Producer
        return self._build(lambda: cls(self.bootstrap, **options))

    def make_consumer(self, *topics: str, **options: Any) -> Any:
        cls = AsyncConsumer if self.is_async else Consumer
        return self._build(lambda: cls(*topics, bootstrap_servers=self.bootstrap, **options))

    def _build(self, make: Callable[[], Any]) -> Any:
        return make() if self.portal is None else self.portal.call(make)

    @contextmanager
    def _async_entered(self, make: Callable[[], Any], driver: Callable[..., Any]) -> Iterator[Any]:
        assert self.portal is not None
        target = self.portal.call(make)  # built in the event loop's thread
        with self.portal.wrap_async_context_manager(target):
            yield driver(target, self.portal)


@contextmanager
def _entered(target: Any, driver: Callable[[Any], Any]) -> Iterator[Any]:
    with target:
        yield driver(target)


@contextmanager
def open_face(name: str, bootstrap: str) -> Iterator[Face]:
    backend = BACKENDS[name]
    if backend is None:
        yield Face(name, bootstrap, None)
        return
    with start_blocking_portal(backend[0], backend[1]) as portal:
        yield Face(name, bootstrap, portal)
