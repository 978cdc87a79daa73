"""Broker configuration: Kafka's ``server.properties`` keys, embedded defaults, overrides.

Precedence, lowest first: the embedded defaults below (Kafka's, except ``log.dir`` and the
listener), the properties file, ``ODRADEK_*`` environment variables (``ODRADEK_LOG_DIRS`` sets
``log.dirs``: upper case, dots to underscores, as Kafka's container images do), then
``--override key=value``. An unknown key in the file or an override, or a value of the wrong
type anywhere, is a :class:`ConfigError` naming the key, the value and where it came from.

An ``ODRADEK_*`` variable that maps to no key (``ODRADEK_HOME``, a wrapper script's own
variable) is not meant for the broker: it is ignored and reported in
:attr:`BrokerConfig.warnings`, as Kafka's container images skip what is not a broker key.

Log directories, as Kafka: ``log.dirs`` (comma-separated) wins; when it is not set anywhere,
the single ``log.dir`` is used (default ``/tmp/odradek-logs``). A value that names no
directory (``log.dirs=`` from an unset variable) is an error, never a directory named ``None``.

Cross-key rules are checked once every source is applied (``_check_together``):
``group.min.session.timeout.ms`` <= ``group.max.session.timeout.ms``.

Topic-level defaults (``log.segment.bytes`` → ``segment.bytes`` …) come from the keys each
:class:`odradek.storage.config.ConfigKey` lists as its broker keys, so one table defines each
mapping.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from odradek.broker.listeners import (
    DEFAULT_PROTOCOL_MAP,
    Listener,
    parse_listeners,
    parse_protocol_map,
    resolve_listeners,
)
from odradek.broker.security.keys import SECRET_KEYS, SECURITY_KEYS
from odradek.storage.config import CONFIG_KEYS, LONG_MAX, LogConfig
from odradek.storage.errors import InvalidConfigError

__all__ = ["BrokerConfig", "ConfigError", "Listener", "load_config"]

ENV_PREFIX = "ODRADEK_"
EMBEDDED_DEFAULTS = "the embedded defaults"  # the source name of a value nobody set
_HOUR_MS = 3600 * 1000


class ConfigError(Exception):
    """A configuration key or value the broker cannot start with."""


def _http_listener(text: str) -> Listener | None:
    """``http://host:port`` (the metrics endpoint), or empty for none."""
    text = text.strip()
    if not text:
        return None
    parts = urlsplit(text)
    if parts.scheme.lower() != "http" or parts.port is None or parts.path not in ("", "/"):
        raise ValueError(f"expected http://host:port or nothing, got {text!r}")
    return Listener(parts.hostname or "0.0.0.0", parts.port)


def _int(low: int = -(2**63), high: int = LONG_MAX) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if not low <= value <= high:
            raise ValueError(f"must be in [{low}, {high}]")
        return value

    return parse


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("must be true or false")
    return lowered == "true"


def _str(text: str) -> str:
    return text.strip()


def _positive_float(text: str) -> float:
    """A finite number above zero (a rate): ``nan``, ``inf`` and ``-1`` are refused."""
    value = float(text.strip())
    if not (math.isfinite(value) and value > 0):
        raise ValueError("must be a finite number above 0")
    return value


def _float(text: str) -> float:
    value = float(text.strip())
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _dir_list(text: str) -> str:
    """Comma-separated directories (Kafka's CSV list: blanks dropped); at least one."""
    if not [p for p in text.split(",") if p.strip()]:
        raise ValueError("names no directory")
    return text.strip()


# Broker keys: name -> (parser, default as text). Topic-level defaults are validated again by
# storage.config when they are turned into a LogConfig.
BROKER_KEYS: dict[str, tuple[Callable[[str], object], str | None]] = {
    "node.id": (_int(0, 2**31 - 1), "1"),
    # NAME://host:port,... (broker/listeners.py); names map to security protocols
    "listeners": (parse_listeners, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (parse_listeners, None),
    "listener.security.protocol.map": (parse_protocol_map, DEFAULT_PROTOCOL_MAP),
    # odradek's own (Kafka exposes JMX): Prometheus metrics at http://host:port/metrics
    "metrics.listener": (_http_listener, ""),
    "log.dirs": (_dir_list, None),
    "log.dir": (_dir_list, "/tmp/odradek-logs"),
    "num.partitions": (_int(1, 2**31 - 1), "1"),
    # KIP-578's name (not in a Kafka release): every partition holds descriptors and mappings.
    "max.broker.partitions": (_int(1, 2**31 - 1), "10000"),
    "auto.create.topics.enable": (_bool, "true"),
    "delete.topic.enable": (_bool, "true"),
    "message.max.bytes": (_int(0, 2**31 - 1), "1048588"),
    "socket.request.max.bytes": (_int(1, 2**31 - 1), "104857600"),
    # odradek's own (Kafka has no such bound): what one produced batch, and all the batches
    # of one Produce request, may decompress to while they are validated.
    "message.max.decompressed.bytes": (_int(1, 2**31 - 1), "33554432"),
    "produce.request.max.decompressed.bytes": (_int(1), "134217728"),
    "max.connections": (_int(1, 2**31 - 1), "2147483647"),
    "connections.max.idle.ms": (_int(1), "600000"),
    # odradek's own (Kafka bounds a consumer's wait only by its request.timeout.ms): the
    # longest a Fetch long-polls, whatever max_wait_ms it asks for
    "fetch.wait.max.ms": (_int(0, 2**31 - 1), "30000"),
    "log.segment.bytes": (_int(14, 2**31 - 1), "1073741824"),
    "log.roll.ms": (_int(1), None),
    "log.roll.hours": (_int(1, 2**31 - 1), "168"),
    "log.index.size.max.bytes": (_int(8, 2**31 - 1), "10485760"),
    "log.index.interval.bytes": (_int(0, 2**31 - 1), "4096"),
    "log.flush.interval.messages": (_int(1), str(LONG_MAX)),
    "log.flush.interval.ms": (_int(0), None),
    "log.flush.scheduler.interval.ms": (_int(1), str(LONG_MAX)),
    "log.flush.offset.checkpoint.interval.ms": (_int(1, 2**31 - 1), "60000"),
    "log.retention.ms": (_int(-1), None),
    "log.retention.minutes": (_int(-1, 2**31 - 1), None),
    "log.retention.hours": (_int(-1, 2**31 - 1), "168"),
    "log.retention.bytes": (_int(-1), "-1"),
    "log.retention.check.interval.ms": (_int(1), "300000"),
    "log.segment.delete.delay.ms": (_int(0), "60000"),
    "log.cleanup.policy": (_str, "delete"),
    "log.cleaner.enable": (_bool, "true"),
    "log.cleaner.threads": (_int(1, 64), "1"),
    "log.cleaner.backoff.ms": (_int(0), "15000"),
    "log.cleaner.dedupe.buffer.size": (_int(0), "134217728"),
    "log.cleaner.io.max.bytes.per.second": (_positive_float, "1.7976931348623157E308"),
    "log.cleaner.min.cleanable.ratio": (_float, "0.5"),
    "log.cleaner.delete.retention.ms": (_int(0), "86400000"),
    "log.cleaner.min.compaction.lag.ms": (_int(0), "0"),
    "log.cleaner.max.compaction.lag.ms": (_int(1), str(LONG_MAX)),
    "log.message.timestamp.type": (_str, "CreateTime"),
    "compression.type": (_str, "producer"),
    # Kafka's: how long a partition keeps an idle idempotent producer's state (sequence
    # numbers, epoch) after its last batch's timestamp (storage/producer_state.py).
    "producer.id.expiration.ms": (_int(1, 2**31 - 1), "86400000"),
    "offsets.topic.num.partitions": (_int(1, 1000), "50"),
    "offsets.retention.minutes": (_int(1, 2**31 - 1), "10080"),
    "group.initial.rebalance.delay.ms": (_int(0, 2**31 - 1), "3000"),
    "group.min.session.timeout.ms": (_int(0, 2**31 - 1), "6000"),
    "group.max.session.timeout.ms": (_int(0, 2**31 - 1), "1800000"),
    **SECURITY_KEYS,  # ssl.*, sasl.*, super.users (broker/security/keys.py)
}


@dataclass(frozen=True)
class BrokerConfig:
    """The parsed broker configuration; ``values`` holds every key, typed."""

    values: Mapping[str, object]
    sources: Mapping[str, str] = field(default_factory=dict)  # key -> where it was set
    warnings: Sequence[str] = ()  # what was ignored (unknown ODRADEK_* variables), to log

    def __getitem__(self, key: str) -> object:
        return self.values[key]

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])  # type: ignore[call-overload]

    @property
    def listeners(self) -> tuple[Listener, ...]:
        """Every listener, each with its security protocol (``listeners`` and the map)."""
        protocols = self.values["listener.security.protocol.map"]
        return resolve_listeners(self.values["listeners"], protocols, "listeners")  # type: ignore[arg-type]

    @property
    def listener(self) -> Listener:
        """The first listener (the one a single-listener broker has)."""
        return self.listeners[0]

    def advertised(self, listener: Listener) -> Listener:
        """What clients that came in on ``listener`` are told to connect to (Metadata,
        FindCoordinator): its entry in ``advertised.listeners``, else itself."""
        for candidate in self.values.get("advertised.listeners") or ():  # type: ignore[attr-defined]
            if candidate.name == listener.name:
                return dataclasses.replace(listener, host=candidate.host, port=candidate.port)
        return listener

    @property
    def advertised_listener(self) -> Listener:
        return self.advertised(self.listener)

    @property
    def metrics_listener(self) -> Listener | None:
        return self.values.get("metrics.listener")  # type: ignore[return-value]

    @property
    def log_dirs(self) -> list[Path]:
        raw = self.values.get("log.dirs")
        if raw is None:  # Kafka: log.dirs wins, log.dir is the fallback
            raw = self.values["log.dir"]
        return [Path(p.strip()) for p in str(raw).split(",") if p.strip()]

    def int(self, key: str) -> int:
        return int(self.values[key])  # type: ignore[call-overload]

    def log_config(self) -> LogConfig:
        """Topic defaults from the broker keys (``log.segment.bytes`` → ``segment.bytes``...)."""
        topic_values: dict[str, str] = {}
        origin: dict[str, str] = {}  # topic-level name -> the broker key its value came from
        for name, key in CONFIG_KEYS.items():
            for broker_key in key.broker_keys:
                value = self.values.get(broker_key)
                if value is not None:
                    topic_values[name] = str(value)
                    origin[name] = broker_key
        if self.values.get("log.roll.ms") is None:
            topic_values["segment.ms"] = str(self.int("log.roll.hours") * _HOUR_MS)
            origin["segment.ms"] = "log.roll.hours"
        if self.values.get("log.retention.ms") is None:
            minutes = self.values.get("log.retention.minutes")
            if minutes is not None:
                retention_ms = int(minutes) * 60_000  # type: ignore[call-overload]
                origin["retention.ms"] = "log.retention.minutes"
            else:
                retention_ms = self.int("log.retention.hours") * _HOUR_MS
                origin["retention.ms"] = "log.retention.hours"
            topic_values["retention.ms"] = str(max(retention_ms, -1))
        if self.values.get("log.flush.interval.ms") is None:
            topic_values["flush.ms"] = str(self.values["log.flush.scheduler.interval.ms"])
            origin["flush.ms"] = "log.flush.scheduler.interval.ms"
        config = LogConfig()
        for name, text in topic_values.items():  # one at a time, to name the culprit
            try:
                config = config.with_overrides({name: text})
            except InvalidConfigError as exc:
                key = origin.get(name, name)
                source = self.sources.get(key, EMBEDDED_DEFAULTS)
                raise ConfigError(f"invalid value {text!r} for {key} in {source}: {exc}") from None
        return dataclasses.replace(
            config, producer_id_expiration_ms=self.int("producer.id.expiration.ms")
        )


def parse_properties(text: str, source: str) -> dict[str, str]:
    """``key=value`` lines (``#``/``!`` comments, blank lines, ``key: value``), Java-style."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep <= 0:
            raise ConfigError(f"{source}:{number}: expected key=value, got {raw!r}")
        values[line[:sep].strip()] = line[sep + 1 :].strip()
    return values


def _apply(
    typed: dict[str, object], sources: dict[str, str], raw: Mapping[str, str], source: str
) -> None:
    for key, text in raw.items():
        spec = BROKER_KEYS.get(key)
        if spec is None:
            raise ConfigError(f"unknown config key {key!r} (value {_shown(key, text)}) in {source}")
        parser, _ = spec
        try:
            typed[key] = parser(text)
        except ValueError as exc:
            shown = _shown(key, text)
            raise ConfigError(f"invalid value {shown} for {key} in {source}: {exc}") from None
        sources[key] = source


def _shown(key: str, text: str) -> str:
    """A value as an error message shows it: never a password (``sasl.jaas.config`` holds
    one too, should a Kafka configuration be copied here)."""
    secret = key in SECRET_KEYS or any(w in key for w in ("password", "secret", "jaas"))
    return "[hidden]" if secret else repr(text)


def load_config(
    path: Path | None = None,
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Defaults, then ``path`` (if given), then ``ODRADEK_*`` variables, then ``overrides``."""
    typed: dict[str, object] = {}
    sources: dict[str, str] = {}
    defaults = {k: default for k, (_, default) in BROKER_KEYS.items() if default is not None}
    _apply(typed, sources, defaults, EMBEDDED_DEFAULTS)
    for key in BROKER_KEYS:
        typed.setdefault(key, None)
    if path is not None:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        _apply(typed, sources, parse_properties(text, str(path)), str(path))
    env = os.environ if environ is None else environ
    warnings = []
    for name, value in sorted(env.items()):
        if name.startswith(ENV_PREFIX) and name != ENV_PREFIX:
            key = name[len(ENV_PREFIX) :].lower().replace("_", ".")
            if key not in BROKER_KEYS:
                warnings.append(f"ignoring environment variable {name}: {key!r} is no broker key")
                continue
            _apply(typed, sources, {key: value}, f"environment variable {name}")
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override expects key=value, got {item!r}")
        _apply(typed, sources, {key.strip(): value}, "--override")
    config = BrokerConfig(typed, sources, tuple(warnings))
    config.log_config()  # validate the topic defaults now, naming the key
    _check_together(config)
    return config


def _check_together(config: BrokerConfig) -> None:
    """Rules that span keys, each error naming both keys, their values and sources."""
    _check_listeners(config)
    low, high = "group.min.session.timeout.ms", "group.max.session.timeout.ms"
    if config.int(low) > config.int(high):

        def where(key: str) -> str:
            return f"{key}={config[key]} (from {config.sources.get(key, EMBEDDED_DEFAULTS)})"

        raise ConfigError(f"{where(low)} is above {where(high)}: no session timeout would fit")


def _check_listeners(config: BrokerConfig) -> None:
    """Every listener name maps to a protocol; advertised names are listeners' names; a TLS
    listener has a keystore, a SASL listener at least one mechanism."""
    protocols = config["listener.security.protocol.map"]
    advertised = config.values.get("advertised.listeners") or ()
    for key in ("listeners", "advertised.listeners"):
        try:
            resolve_listeners(config.values.get(key) or (), protocols, key)  # type: ignore[arg-type]
        except ValueError as exc:
            value = ",".join(str(listener) for listener in config[key])  # type: ignore[attr-defined]
            source = config.sources.get(key, EMBEDDED_DEFAULTS)
            raise ConfigError(f"invalid value {value!r} for {key} in {source}: {exc}") from None
    listeners = config.listeners
    names = {listener.name for listener in listeners}
    for candidate in advertised:  # type: ignore[attr-defined]
        if candidate.name not in names:
            raise ConfigError(
                f"advertised.listeners names {candidate.name!r}, which is not in listeners "
                f"({', '.join(sorted(names))})"
            )
    tls = [str(listener) for listener in listeners if listener.tls]
    if tls and not config["ssl.keystore.location"]:
        raise ConfigError(f"listeners {', '.join(tls)} use TLS: set ssl.keystore.location")
    sasl = [str(listener) for listener in listeners if listener.sasl]
    if sasl and not config["sasl.enabled.mechanisms"]:
        raise ConfigError(f"listeners {', '.join(sasl)} use SASL: set sasl.enabled.mechanisms")
