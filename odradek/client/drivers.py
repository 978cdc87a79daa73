"""The two drivers of the client's sans-I/O operations, one blocking and one async, and the
decorators that turn an operation written once into a method of each face.

An operation (:mod:`odradek.client.ops`, :mod:`odradek.client.admin`,
:mod:`odradek.client.group_ops`, :mod:`odradek.client.group`, the cores) is a generator that
yields *effects* and returns its result. An effect is a named tuple whose class names a
``verb``; the driver carries it out by calling the method of that name on the face's *I/O
object* (its client: :class:`~odradek.client.blocking_client.Client` or
:class:`~odradek.client.async_client.AsyncClient`) with the tuple's fields as arguments:

- :class:`Call` -> ``io.call(request, raw)``: send a request, get ``(response, raw_tail)``;
- :class:`Sleep` -> ``io.sleep(seconds)``: a retry backoff;
- :class:`Notify` -> ``io.notify(callback, partitions)``: run a rebalance callback;
- the client's own connection effects (:mod:`odradek.client.core`).

A driver:

1. starts the operation;
2. calls (blocking) or awaits (async) the I/O object's method for each effect it yields;
3. sends the outcome back in, or throws the exception the method raised into the operation
   (which may catch it; if it does not, it propagates to the caller);
4. returns the operation's result when it stops.

Nothing else steps an operation. Cancellation (async): a cancelled effect ends the driver at
once; the generator is closed when it is collected (``GeneratorExit`` runs its ``finally``
blocks).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Generator, Sequence
from typing import Any, NamedTuple, Self, TypeVar

from odradek.protocol import messages as m
from odradek.protocol.frames import Buffer

__all__ = [
    "AsyncClosing",
    "Call",
    "Closing",
    "Notify",
    "Sleep",
    "async_face",
    "blocking_face",
    "drive",
    "drive_async",
    "operation",
]

T = TypeVar("T")


class Call(NamedTuple):
    """Send ``request`` (and its raw record bytes) and get ``(response, raw_tail)``."""

    request: m.Request
    raw: Buffer | Sequence[Buffer] = b""
    verb = "call"


class Sleep(NamedTuple):
    """Wait ``seconds`` (a retry backoff)."""

    seconds: float
    verb = "sleep"


class Notify(NamedTuple):
    """Run a rebalance callback with a set of partitions (an ``async`` one is awaited)."""

    callback: Callable[[set[Any]], Any]
    partitions: set[Any]
    verb = "notify"


def drive(op: Generator[Any, Any, T], io: Any) -> T:
    """Run ``op`` to its end on the calling thread, carrying out its effects with ``io``."""
    try:
        effect = next(op)
        while True:
            try:
                outcome, error = getattr(io, effect.verb)(*effect), None
            except Exception as exc:
                outcome, error = None, exc
            # thrown outside the except block: the operation sees no exception being handled
            effect = op.send(outcome) if error is None else op.throw(error)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def drive_async(op: Generator[Any, Any, T], io: Any) -> T:
    """Run ``op`` to its end in the calling task, awaiting ``io``'s method for each effect."""
    try:
        effect = next(op)
        while True:
            try:
                outcome, error = await getattr(io, effect.verb)(*effect), None
            except Exception as exc:
                outcome, error = None, exc
            # thrown outside the except block: the operation sees no exception being handled
            effect = op.send(outcome) if error is None else op.throw(error)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


# -- faces ---------------------------------------------------------------------------------------
_OP_RESULT = re.compile(r"^Op\[(.*)\]$", re.DOTALL)


def operation(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a core method that returns an operation (annotated ``Op[T]``): each face gets a
    method of the same name, signature and docstring returning ``T``."""
    method.__operation__ = True  # type: ignore[attr-defined]
    return method


def _face_method(method: Callable[..., Any], run: Callable[..., Any]) -> Callable[..., Any]:
    functools.update_wrapper(run, method)
    del run.__wrapped__  # type: ignore[attr-defined]
    del run.__operation__  # type: ignore[attr-defined]  (copied by update_wrapper)
    signature = inspect.signature(method)
    result = _OP_RESULT.match(str(signature.return_annotation))
    returns = result.group(1) if result else signature.return_annotation
    run.__signature__ = signature.replace(return_annotation=returns)  # type: ignore[attr-defined]
    run.__annotations__ = {**method.__annotations__, "return": returns}
    return run


def _face(cls: type[T], wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> type[T]:
    """Replace each :func:`operation` of ``cls`` with ``wrap(operation)``."""
    for name in dir(cls):
        if getattr(method := getattr(cls, name), "__operation__", False):
            setattr(cls, name, wrap(method))
    return cls


def _blocking(method: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return drive(method(self, *args, **kwargs), self._io)

    return _face_method(method, run)


def _async(method: Callable[..., Any]) -> Callable[..., Any]:
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await drive_async(method(self, *args, **kwargs), self._io)

    return _face_method(method, run)


class Closing:
    """A blocking face's ``with``: ``__exit__`` closes it (``self.close()``)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # type: ignore[attr-defined]


class AsyncClosing:
    """An async face's ``async with``: ``__aexit__`` awaits ``self.close()``."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()  # type: ignore[attr-defined]


def blocking_face(cls: type[T]) -> type[T]:
    """Class decorator: each :func:`operation` of ``cls`` becomes a method that drives it on
    the calling thread with ``self._io`` (blocking until it is done)."""
    return _face(cls, _blocking)


def async_face(cls: type[T]) -> type[T]:
    """Class decorator: each :func:`operation` of ``cls`` becomes a coroutine method that
    drives it in the calling task with ``self._io``."""
    return _face(cls, _async)
