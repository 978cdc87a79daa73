"""Log compaction (``cleanup.policy=compact``): see :mod:`odradek.storage.cleaner.clean` for a pass,
:mod:`odradek.storage.cleaner.plan` for what is cleanable, :mod:`odradek.storage.cleaner.records`
for the batch rewriting, :mod:`odradek.storage.cleaner.offset_map` and
:mod:`odradek.storage.cleaner.throttle`."""
