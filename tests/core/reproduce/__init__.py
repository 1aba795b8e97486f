"""Tests of the paper reproductions (simulations.core.reproduce)."""
