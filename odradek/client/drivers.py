"""The two drivers of the client's sans-I/O operations: one blocking, one async.

An operation (:mod:`odradek.client.ops`, :mod:`odradek.client.admin_ops`,
:mod:`odradek.client.group_ops`, :mod:`odradek.client.group`, :mod:`odradek.client.consumer_core`)
is a generator that yields effects (a :class:`~odradek.client.ops.Call`, a
:class:`~odradek.client.group.Sleep`, a :class:`~odradek.client.group.Notify`) and returns its
result. A driver:

1. starts the operation (``next``);
2. hands each effect it yields to ``effect``, the face's way of carrying it out (a blocking call,
   or an awaited one);
3. sends the outcome back in, or throws the exception ``effect`` raised into the operation
   (which may catch it; if it does not, it propagates to the caller);
4. returns the operation's result when it stops.

Every face runs its operations through :func:`drive` or :func:`drive_async`, and nothing else
steps an operation. Cancellation (async): a cancelled ``effect`` ends the driver at once; the
generator is closed when it is collected (``GeneratorExit`` runs its ``finally`` blocks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["drive", "drive_async"]

T = TypeVar("T")


def drive(op: Generator[Any, Any, T], effect: Callable[[Any], Any]) -> T:
    """Run ``op`` to its end on the calling thread, carrying out its effects with ``effect``."""
    try:
        item = next(op)
        while True:
            try:
                outcome = effect(item)
            except Exception as exc:
                item = op.throw(exc)
            else:
                item = op.send(outcome)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def drive_async(op: Generator[Any, Any, T], effect: Callable[[Any], Awaitable[Any]]) -> T:
    """Run ``op`` to its end in the calling task, awaiting ``effect`` for each of its effects."""
    try:
        item = next(op)
        while True:
            try:
                outcome = await effect(item)
            except Exception as exc:
                item = op.throw(exc)
            else:
                item = op.send(outcome)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
