"""The Kafka listener: Apache Kafka's wire protocol onto the broker's shared handlers.

:mod:`.session` serves one connection (order, versions, acks=0); :mod:`.adapters` routes each
api key to an adapter in :mod:`.data`, :mod:`.admin` or :mod:`.groups`, which translate
Kafka's request fields into the native request structs the handlers take, and their answers
back. The codec is :mod:`odradek.protocol.kafka`.
"""
