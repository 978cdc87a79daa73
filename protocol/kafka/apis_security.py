"""The security APIs: SaslHandshake, SaslAuthenticate, DescribeUserScramCredentials,
AlterUserScramCredentials, and the ACL APIs (DescribeAcls, CreateAcls, DeleteAcls).

Layouts per :mod:`odradek.protocol.kafka.schema`, transcribed from Apache Kafka's message
definitions and cut to the versions spoken here. SaslHandshake v0 is not spoken: after it
the client sends bare SASL tokens outside Kafka's framing (the pre-KIP-152 exchange), and
every maintained client uses v1 and SaslAuthenticate.
"""

from __future__ import annotations

from odradek.protocol.kafka.schema import BYTES, INT8, INT16, INT32, INT64, STRING, Api, ArrayOf, F

SASL_HANDSHAKE = Api(
    17,
    "SaslHandshake",
    (1, 1),
    flexible=None,
    request=(F("mechanism", STRING, "1+"),),
    response=(
        F("error_code", INT16, "1+"),
        F("mechanisms", ArrayOf(STRING), "1+"),
    ),
)

SASL_AUTHENTICATE = Api(
    36,
    "SaslAuthenticate",
    (0, 2),
    flexible=2,
    request=(F("auth_bytes", BYTES, "0+"),),
    response=(
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+"),
        F("auth_bytes", BYTES, "0+"),
        F("session_lifetime_ms", INT64, "1+", default=0),
    ),
)

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    50,
    "DescribeUserScramCredentials",
    (0, 0),
    flexible=0,
    request=(F("users", ArrayOf(F("name", STRING, "0+")), "0+", nullable="0+"),),
    response=(
        F("throttle_time_ms", INT32, "0+"),
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+"),
        F(
            "results",
            ArrayOf(
                F("user", STRING, "0+"),
                F("error_code", INT16, "0+"),
                F("error_message", STRING, "0+", nullable="0+"),
                F(
                    "credential_infos",
                    ArrayOf(F("mechanism", INT8, "0+"), F("iterations", INT32, "0+")),
                    "0+",
                ),
            ),
            "0+",
        ),
    ),
)

# librdkafka (2.x, confluent-kafka) ends this request with one empty tagged-field section
# too many: a single trailing zero byte, let through.
ALTER_USER_SCRAM_CREDENTIALS = Api(
    51,
    "AlterUserScramCredentials",
    (0, 0),
    flexible=0,
    trailing_zeros=1,
    request=(
        F("deletions", ArrayOf(F("name", STRING, "0+"), F("mechanism", INT8, "0+")), "0+"),
        F(
            "upsertions",
            ArrayOf(
                F("name", STRING, "0+"),
                F("mechanism", INT8, "0+"),
                F("iterations", INT32, "0+"),
                F("salt", BYTES, "0+"),
                F("salted_password", BYTES, "0+"),
            ),
            "0+",
        ),
    ),
    response=(
        F("throttle_time_ms", INT32, "0+"),
        F(
            "results",
            ArrayOf(
                F("user", STRING, "0+"),
                F("error_code", INT16, "0+"),
                F("error_message", STRING, "0+", nullable="0+"),
            ),
            "0+",
        ),
    ),
)

# ACLs (KIP-140, pattern types from v1: KIP-290). v0 is not spoken: it has no pattern type.
# who may do what, in a binding (CreateAcls, and the bindings Describe/DeleteAcls answer with)
_ACL = (
    F("principal", STRING, "1+"),
    F("host", STRING, "1+"),
    F("operation", INT8, "1+"),
    F("permission_type", INT8, "1+"),
)
_ACL_FILTER = (
    F("resource_type_filter", INT8, "1+"),
    F("resource_name_filter", STRING, "1+", nullable="1+"),
    F("pattern_type_filter", INT8, "1+", default=3),
    F("principal_filter", STRING, "1+", nullable="1+"),
    F("host_filter", STRING, "1+", nullable="1+"),
    F("operation", INT8, "1+"),
    F("permission_type", INT8, "1+"),
)

DESCRIBE_ACLS = Api(
    29,
    "DescribeAcls",
    (1, 3),
    flexible=2,
    request=_ACL_FILTER,
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "1+"),
        F("error_message", STRING, "1+", nullable="1+"),
        F(
            "resources",
            ArrayOf(
                F("resource_type", INT8, "1+"),
                F("resource_name", STRING, "1+"),
                F("pattern_type", INT8, "1+", default=3),
                F(
                    "acls",
                    ArrayOf(*_ACL),
                    "1+",
                ),
            ),
            "1+",
        ),
    ),
)

CREATE_ACLS = Api(
    30,
    "CreateAcls",
    (1, 3),
    flexible=2,
    request=(
        F(
            "creations",
            ArrayOf(
                F("resource_type", INT8, "1+"),
                F("resource_name", STRING, "1+"),
                F("resource_pattern_type", INT8, "1+", default=3),
                *_ACL,
            ),
            "1+",
        ),
    ),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F(
            "results",
            ArrayOf(
                F("error_code", INT16, "1+"),
                F("error_message", STRING, "1+", nullable="1+"),
            ),
            "1+",
        ),
    ),
)

DELETE_ACLS = Api(
    31,
    "DeleteAcls",
    (1, 3),
    flexible=2,
    request=(F("filters", ArrayOf(*_ACL_FILTER), "1+"),),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F(
            "filter_results",
            ArrayOf(
                F("error_code", INT16, "1+"),
                F("error_message", STRING, "1+", nullable="1+"),
                F(
                    "matching_acls",
                    ArrayOf(
                        F("error_code", INT16, "1+"),
                        F("error_message", STRING, "1+", nullable="1+"),
                        F("resource_type", INT8, "1+"),
                        F("resource_name", STRING, "1+"),
                        F("pattern_type", INT8, "1+", default=3),
                        *_ACL,
                    ),
                    "1+",
                ),
            ),
            "1+",
        ),
    ),
)
