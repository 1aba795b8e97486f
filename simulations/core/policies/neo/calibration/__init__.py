"""Neo's calibration: :mod:`.cpu_attention` re-derives the host CPUs' bandwidths from their
anchor and checks Neo's qualitative claims about CPU attention against the model (nothing of
the CPU attention stack is fitted: Neo publishes no kernel timing)."""
