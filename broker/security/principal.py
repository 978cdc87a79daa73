"""Who a connection is: Kafka's principals (``User:alice``) and how a TLS client
certificate becomes one.

- A connection that neither authenticated with SASL nor showed a client certificate is
  ``User:ANONYMOUS`` (Kafka's name).
- SASL: ``User:<the authenticated user name>``.
- TLS with a client certificate: ``User:<name>``, where ``name`` is the certificate's subject
  as an RFC 4514 distinguished name (``CN=alice,OU=eng,O=example``, the most specific part
  first, as Java's ``X500Principal.getName()`` writes it) passed through
  ``ssl.principal.mapping.rules``.

Mapping rules (Kafka's ``SslPrincipalMapper``): a comma-separated list of
``RULE:pattern/replacement/`` (optionally ``/L`` or ``/U`` to lower- or upper-case the result)
and ``DEFAULT`` (the DN unchanged). The first rule whose pattern matches the *whole* DN wins;
``$1``... in the replacement are the pattern's groups. No rule matching is an error: the
connection is refused, as Kafka refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ANONYMOUS", "MappingRule", "map_principal", "parse_mapping_rules", "user"]

ANONYMOUS = "User:ANONYMOUS"

_RULE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/"
    r"(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU]?))\s*(?:,|$)"
)
_JAVA_GROUP = re.compile(r"\$(\d+)")


def user(name: str) -> str:
    return f"User:{name}"


@dataclass(frozen=True)
class MappingRule:
    """One rule; ``pattern`` None is ``DEFAULT``."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        name = match.expand(self.replacement)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def parse_mapping_rules(text: str) -> tuple[MappingRule, ...]:
    """The rules of ``ssl.principal.mapping.rules``; a ``ValueError`` names what is wrong."""
    rules, position, text = [], 0, text.strip()
    while position < len(text):
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"cannot parse a rule at {text[position:]!r}")
        position = match.end()
        if match["default"]:
            rules.append(MappingRule())
            continue
        try:
            pattern = re.compile(match["pattern"])
        except re.error as exc:
            raise ValueError(f"bad pattern {match['pattern']!r}: {exc}") from None
        replacement = _JAVA_GROUP.sub(r"\\g<\1>", match["replacement"])
        rules.append(MappingRule(pattern, replacement, match["case"]))
    if not rules:
        raise ValueError("no rule (DEFAULT keeps the subject as it is)")
    return tuple(rules)


def map_principal(dn: str, rules: tuple[MappingRule, ...]) -> str:
    """``User:<name>`` for a certificate subject; ``ValueError`` if no rule matches."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return user(name)
    raise ValueError(f"no ssl.principal.mapping.rules rule matches {dn!r}")
