"""Log compaction (``cleanup.policy=compact``): see :mod:`storage.cleaner.clean` for a pass,
:mod:`storage.cleaner.plan` for what is cleanable, :mod:`storage.cleaner.records` for the batch
rewriting, :mod:`storage.cleaner.offset_map` and :mod:`storage.cleaner.throttle`."""
