"""Benchmarks (`make bench`): pytest-benchmark tests plus the report plugin."""
