"""The hetplanner simulation core: pure Python + numpy/scipy, never Django.

Data flows one way: ``spec`` objects (devices, runtime profiles, models, workloads, systems)
→ ``devices`` cost models over the ``graph`` of operators → ``engine`` + a ``policies``
entry → ``metrics`` (the result document, docs/architecture.md).
"""
