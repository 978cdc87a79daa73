"""The clients' configuration: one frozen object per client kind, validated once, with the
names Kafka's clients use (``bootstrap_servers``, ``acks``, ``linger_ms``, ...).

:class:`ClientConfig` is what every client needs to reach the broker (the admin clients and
the low-level clients use it as it is); :class:`ProducerConfig` and :class:`ConsumerConfig`
add their own. The faces' constructors take the same names as keyword arguments and build
their config; it is then read, never changed (``client.config``). A bad value raises
``ValueError`` naming the option, when the object is made.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, fields
from dataclasses import field as _field
from typing import Any

from odradek.client.security import check_choice, check_security
from odradek.protocol.record_batch import Compression

__all__ = ["ClientConfig", "ConsumerConfig", "ProducerConfig", "options_of", "parse_bootstrap"]

_CODECS = {None: Compression.NONE, **{codec.name.lower(): codec for codec in Compression}}
_ACKS = {0: 0, 1: 1, -1: -1, "all": -1}
_OFFSET_RESETS = ("earliest", "latest", "none")
_DEFAULT_DELIVERY_TIMEOUT_MS = 120_000
log = logging.getLogger(__name__)
_ASSIGNORS = ("range", "roundrobin", "cooperative-sticky", "sticky")


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h:p"``, ``"h1:p1,h2:p2"`` or a list of those -> ``[(host, port), ...]``.

    IPv6 literals go in brackets (``"[::1]:9092"``); a missing port means 9092. A
    ``(host, port)`` pair (a parsed list given again) is kept."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for raw_item in items:
        if isinstance(raw_item, tuple):
            out.append(raw_item)
            continue
        item = raw_item.strip()
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else "9092"
        elif item.count(":") == 1:
            host, port = item.split(":")
        else:
            host, port = item, "9092"
        try:
            out.append((host, int(port)))
        except ValueError:
            raise ValueError(f"bad bootstrap server {item!r}: port is not a number") from None
    if not out:
        raise ValueError(f"no bootstrap servers in {servers!r}")
    return out


def _set(config: Any, name: str, value: Any) -> None:
    object.__setattr__(config, name, value)  # normalizing a frozen dataclass in __post_init__


@dataclass(frozen=True, kw_only=True)
class ClientConfig:
    """How to reach the broker (every client kind).

    ``bootstrap_servers`` is normalized to a tuple of ``(host, port)``; the ``*_ms`` options
    must not be negative. The ``security_protocol``, ``ssl_*`` and ``sasl_*`` options are
    :mod:`odradek.client.security`'s: with TLS, ``ssl_context`` is kept as the context built
    from the ``ssl_*`` files (or the one given). Passwords are left out of the ``repr``."""

    bootstrap_servers: Any  # str | Sequence[str] given; tuple[tuple[str, int], ...] kept
    client_id: str = "odradek-python"
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    security_protocol: str = "PLAINTEXT"
    ssl_context: Any = None  # an ssl.SSLContext given; the one to use kept (None: no TLS)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = _field(default=None, repr=False)
    ssl_check_hostname: bool = True
    sasl_mechanism: str = "PLAIN"
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = _field(default=None, repr=False)

    #: options that must be > 0 (the other ints must be >= 0)
    _POSITIVE = frozenset()

    def backoff_s(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (0-based), in seconds: ``retry_backoff_ms``
        doubling with each attempt, at most ``retry_backoff_max_ms``."""
        return (
            min(self.retry_backoff_ms * (1 << min(attempt, 30)), self.retry_backoff_max_ms) / 1000
        )

    def __post_init__(self) -> None:
        _set(self, "bootstrap_servers", tuple(parse_bootstrap(self.bootstrap_servers)))
        _set(self, "ssl_context", check_security(self))
        for field in fields(self):
            value = getattr(self, field.name)
            if type(value) is not int or field.name == "acks":
                continue
            if value < 0 or (not value and field.name in self._POSITIVE):
                raise ValueError(f"{field.name} must be positive, not {value}")


@dataclass(frozen=True, kw_only=True)
class ProducerConfig(ClientConfig):
    """A producer's options (Kafka's producer configs, dots as underscores).

    ``acks`` is kept as 0, 1 or -1 (``"all"``); ``compression_type`` as a
    :class:`~odradek.protocol.record_batch.Compression`. ``delivery_timeout_ms`` must be at
    least ``linger_ms + request_timeout_ms`` (Kafka's rule); not given, it is 120 s, or that
    sum when it is more (with a warning, as Java's)."""

    acks: Any = 1  # 0, 1, -1 or "all" given; 0, 1 or -1 kept
    linger_ms: int = 5
    batch_size: int = 1_048_576
    buffer_memory: int = 33_554_432
    compression_type: Any = None  # None or a codec name given; a Compression kept
    partitioner: str | Callable[..., int] = "default"
    max_request_size: int = 1_048_576
    max_in_flight: int = 5
    delivery_timeout_ms: int | None = None  # None given: 120 s (see the class); an int kept
    retries: int = 2_147_483_647
    max_block_ms: int = 60_000
    metadata_max_age_ms: int = 300_000

    _POSITIVE = frozenset(("batch_size", "max_in_flight", "max_request_size"))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.acks not in _ACKS or type(self.acks) is bool:
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {self.acks!r}")
        _set(self, "acks", _ACKS[self.acks])
        at_least_ms = self.linger_ms + self.request_timeout_ms  # Java's delivery.timeout.ms rule
        if self.delivery_timeout_ms is None:
            if at_least_ms > _DEFAULT_DELIVERY_TIMEOUT_MS:
                log.warning(
                    "delivery_timeout_ms is linger_ms + request_timeout_ms: %d", at_least_ms
                )
            _set(self, "delivery_timeout_ms", max(at_least_ms, _DEFAULT_DELIVERY_TIMEOUT_MS))
        elif self.delivery_timeout_ms < at_least_ms:
            raise ValueError(
                f"delivery_timeout_ms must be at least linger_ms + request_timeout_ms "
                f"({at_least_ms}), not {self.delivery_timeout_ms}"
            )
        if isinstance(self.compression_type, Compression):
            return
        check_choice("compression_type", self.compression_type, _CODECS)
        _set(self, "compression_type", _CODECS[self.compression_type])


@dataclass(frozen=True, kw_only=True)
class ConsumerConfig(ClientConfig):
    """A consumer's options (Kafka's consumer configs, dots as underscores). The group
    options (``session_timeout_ms`` to ``metadata_max_age_ms``) matter only with a
    ``group_id``."""

    group_id: str | None = None
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52_428_800
    max_partition_fetch_bytes: int = 1_048_576
    max_poll_records: int = 500
    consumer_timeout_ms: float | None = None
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300_000
    partition_assignment_strategy: tuple[str, ...] = ("range",)
    group_instance_id: str | None = None
    metadata_max_age_ms: int = 300_000

    _POSITIVE = frozenset(("max_poll_records", "fetch_max_bytes", "max_partition_fetch_bytes"))

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("auto_offset_reset", self.auto_offset_reset, _OFFSET_RESETS)
        if self.group_id is not None and not self.group_id:
            raise ValueError("group_id must be a non-empty string")
        strategy = self.partition_assignment_strategy
        _set(
            self,
            "partition_assignment_strategy",
            (strategy,) if isinstance(strategy, str) else tuple(strategy),
        )
        for assignor in self.partition_assignment_strategy:
            check_choice("partition_assignment_strategy", assignor, _ASSIGNORS)


_P = inspect.Parameter


def options_of(config_type: type, *, topics: bool = False) -> Callable[[Any], Any]:
    """Decorator of a client's ``__init__(self, bootstrap_servers, **options)``: its signature
    (what ``help()`` and editors show) becomes ``config_type``'s fields as keywords, so the
    options are listed once, in the config class. ``topics``: ``*topics`` comes first and
    ``bootstrap_servers`` is a keyword (the consumers)."""
    head = [_P("self", _P.POSITIONAL_OR_KEYWORD)]
    if topics:
        head.append(_P("topics", _P.VAR_POSITIONAL, annotation="str"))
    kind = _P.KEYWORD_ONLY if topics else _P.POSITIONAL_OR_KEYWORD
    head.append(_P("bootstrap_servers", kind, annotation="str | Sequence[str]"))
    options = [
        _P(f.name, _P.KEYWORD_ONLY, default=f.default, annotation=f.type)
        for f in fields(config_type)
        if f.name != "bootstrap_servers" and f.default is not MISSING
    ]

    def decorate(init: Any) -> Any:
        init.__signature__ = inspect.Signature([*head, *options], return_annotation="None")
        return init

    return decorate
