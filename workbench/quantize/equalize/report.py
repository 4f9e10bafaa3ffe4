"""What ``+cle``/``+bc`` did to one model: the equalised pairs and the report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..._results import Result


@dataclass(frozen=True)
class EqualizedPair:
    """One equalised pair: layer ``first`` -> layer ``second`` through ``through``."""

    first: str
    second: str
    through: tuple[str, ...]
    channels: int
    range_ratio_before: float     # largest / smallest channel range of ``first`` before CLE
    range_ratio_after: float


@dataclass(frozen=True)
class EqualizeReport(Result):
    """What the transforms did to one model."""

    source: str
    output: str
    transforms: tuple[str, ...]
    weights: str
    folded_batch_norms: tuple[str, ...]
    pairs: tuple[EqualizedPair, ...]
    relu6_to_relu: tuple[str, ...]
    bias_corrected: tuple[str, ...]
    key: str
    skipped: tuple[str, ...] = ()
    cache_hit: bool = False

    def summary(self) -> str:
        worst = max((p.range_ratio_before for p in self.pairs), default=1.0)
        after = max((p.range_ratio_after for p in self.pairs), default=1.0)
        return (f"{'+'.join(self.transforms)} on {Path(self.source).name}: {len(self.folded_batch_norms)} batch "
                f"norm(s) folded, {len(self.pairs)} pair(s) equalised (worst channel range ratio "
                f"{worst:.1f} -> {after:.1f}), {len(self.relu6_to_relu)} ReLU6 -> ReLU, "
                f"{len(self.skipped)} pair(s) skipped (ReLU6 clips), "
                f"{len(self.bias_corrected)} bias(es) corrected" + (" (cached)" if self.cache_hit else ""))

    def _repr_html_(self) -> str:
        from ... import display
        rows = [(p.first, p.second, " > ".join(p.through) or "-", p.channels, f"{p.range_ratio_before:.1f}",
                 f"{p.range_ratio_after:.1f}") for p in self.pairs]
        return (display.heading("Cross-layer equalisation") + display.paragraph(self.summary())
                + display.table(("first", "second", "through", "channels", "range ratio before", "after"), rows))
