"""Client exceptions: one class per Kafka error code, named like Kafka's Java exceptions.

Every class derives from :class:`KafkaError` and carries ``code`` (a
:class:`odradek.protocol.errors.ErrorCode`), ``retriable`` (Kafka's flag for the code) and
``message``. :func:`for_code` turns a code from a response into the matching exception instance.
Three client-side conditions have no code of their own on the wire: :class:`KafkaConnectionError`,
:class:`KafkaTimeoutError` and :class:`SslAuthenticationError`.

Naming: the Kafka name in CamelCase with ``Exception`` -> ``Error`` (``UNKNOWN_TOPIC_OR_PARTITION``
-> :class:`UnknownTopicOrPartitionError`), except where Kafka's Java class is named differently
(``MESSAGE_TOO_LARGE`` -> :class:`MessageSizeTooLargeError`, ``CORRUPT_MESSAGE`` ->
:class:`CorruptRecordError`). Classes pickle by code and message, so they cross process
boundaries (Spark executors).
"""

from __future__ import annotations

from typing import Any, ClassVar

from odradek.protocol.errors import ErrorCode

__all__ = [  # extended below with every generated class name
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "SslAuthenticationError",
    "error_class",
    "for_code",
]


class KafkaError(Exception):
    """Base of every client error. ``code``/``retriable`` come from the class (or instance)."""

    code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.code.description or self.code.name
        super().__init__(f"[Error {int(self.code)}] {type(self).__name__}: {self.message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message,))


class KafkaConnectionError(KafkaError):
    """The connection to the broker could not be made or was lost (retriable)."""

    code = ErrorCode.NETWORK_EXCEPTION
    retriable = True


class KafkaTimeoutError(KafkaError):
    """A client-side deadline passed: ``request_timeout_ms``, ``delivery_timeout_ms`` or a
    metadata wait (final)."""

    code = ErrorCode.REQUEST_TIMED_OUT


class SslAuthenticationError(KafkaError):
    """The TLS handshake with the broker failed: a certificate the client does not trust, or
    one that does not name the host (final: a retry would fail the same way)."""

    code = ErrorCode.NETWORK_EXCEPTION


# Kafka's Java class names where the mechanical rule does not give them.
_SPECIAL_NAMES = {
    ErrorCode.MESSAGE_TOO_LARGE: "MessageSizeTooLargeError",
    ErrorCode.CORRUPT_MESSAGE: "CorruptRecordError",
}


def _class_name(code: ErrorCode) -> str:
    special = _SPECIAL_NAMES.get(code)
    if special:
        return special
    words = code.name.split("_")
    if words[-1] in ("EXCEPTION", "ERROR"):
        words = words[:-1]
    return "".join(w.capitalize() for w in words) + "Error"


_BY_CODE: dict[int, type[KafkaError]] = {}
for _code in ErrorCode:
    if _code is ErrorCode.NONE:
        continue
    _name = _class_name(_code)
    _cls = type(
        _name,
        (KafkaError,),
        {
            "code": _code,
            "retriable": _code.retriable,
            "__doc__": _code.description,
            "__module__": __name__,
        },
    )
    _BY_CODE[int(_code)] = _cls
    globals()[_name] = _cls
    __all__.append(_name)


class CommitFailedError(KafkaError):
    """A consumer's commit that cannot succeed because the group has rebalanced without the
    member: the broker answered ``ILLEGAL_GENERATION`` or ``UNKNOWN_MEMBER_ID`` (the
    ``__cause__``), or the member left because the application did not poll for
    ``max_poll_interval_ms``. Its partitions may be another member's by now; the next poll
    joins the group again (Java's ``CommitFailedException``, kafka-python's
    ``CommitFailedError``). Final."""

    code = ErrorCode.UNKNOWN_MEMBER_ID


__all__.append("CommitFailedError")


def error_class(code: int) -> type[KafkaError]:
    """The exception class for ``code`` (unknown codes: ``UnknownServerError``)."""
    return _BY_CODE.get(int(code)) or _BY_CODE[int(ErrorCode.UNKNOWN_SERVER_ERROR)]


def for_code(code: int, message: str | None = None) -> KafkaError:
    """An instance of the exception for a nonzero error ``code`` from a response."""
    if int(code) == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    return error_class(code)(message)
