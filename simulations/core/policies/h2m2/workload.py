"""One generation iteration H2M2 is evaluated at (§5.1): a batch and its KV lengths."""

from __future__ import annotations

from dataclasses import dataclass

from simulations.core.spec import check_count, check_positive


@dataclass(frozen=True)
class Point:
    """A generation iteration: ``batch`` requests whose KV caches hold ``seq_len`` tokens on
    average, counting the token generated in this iteration (the paper's "B32 S1024")."""

    batch: int
    seq_len: float

    def __post_init__(self) -> None:
        check_count("point.batch", self.batch, maximum=1_000_000)
        check_positive("point.seq_len", self.seq_len)
        if self.seq_len > 10_000_000:
            raise ValueError("point.seq_len is absurdly large")

    @property
    def kv_tokens(self) -> float:
        """Cached tokens summed over the batch (attention's work and the KV footprint)."""
        return self.batch * self.seq_len

    @property
    def label(self) -> str:
        """The paper's x-axis label, e.g. ``B32 S1024``."""
        return f"B{self.batch} S{self.seq_len:g}"
