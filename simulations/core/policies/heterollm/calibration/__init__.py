"""HeteroLLM's calibration: :mod:`.npu_w4a16` fits the NPU stack (``w4a16-qnn-hexagon``) to
the paper's single-operator figures, decode speed-ups and graph-preparation times, and
checks the GPU stack and the shared memory against it. Every figure a parameter is fitted to
is a calibration target in the reproduction, never a prediction."""
