"""The catalog: devices (with memory tiers), runtime profiles and LLM models.

* :mod:`simulations.catalog.models` — Device, MemoryTier, RuntimeProfile and LLMModel rows
  (imported by :mod:`simulations.models`, so they belong to the ``simulations`` app);
* :mod:`simulations.catalog.services` — every write (save from a core spec, the seed of the
  shipped catalog, the Hugging Face config import);
* :mod:`simulations.catalog.selectors` — reads (lists, the catalog page, the version key
  figure caches use).

Rows become core specs in :mod:`simulations.adapters`; a device's kind-specific ``params``
are declared by its family (:mod:`simulations.device_families`).
"""
