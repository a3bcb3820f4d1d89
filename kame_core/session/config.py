"""What shapes a tandem session (KAME or Moshi mode): :class:`SessionConfig`, recorded in the trace and read back
from it; the pipeline that runs it is :class:`kame_core.pipelines.tandem.TandemRunner`."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from ..oracle.config import OracleConfig
from ..record.trace import SessionTrace
from ..turns.floor_policies import DEFAULT_FLOOR

__all__ = ["SessionConfig"]


@dataclass
class SessionConfig:
    """Everything that shapes a tandem session; recorded in the trace and read back by :meth:`from_json`."""

    mode: Literal["kame", "moshi"] = "kame"
    oracle: OracleConfig = field(default_factory=OracleConfig)
    forced_delay_ms: int = 0
    seed: int = 0
    #: who decides when the user's turn is over (:data:`kame_core.turns.floor_policies.FLOORS`)
    floor: str = DEFAULT_FLOOR
    #: after the user input ends, stop once the front-end was quiet this long (and no oracle is pending)
    quiet_after_s: float = 1.5
    #: ... and never run longer than this after the input ended
    max_tail_s: float = 15.0
    title: str = ""

    def to_json(self) -> dict[str, object]:
        """The configuration as recorded in a trace (the title is the trace's own field)."""
        return {"mode": self.mode, "oracle": self.oracle.to_json(), "forced_delay_ms": self.forced_delay_ms,
                "floor": self.floor, "seed": self.seed, "quiet_after_s": self.quiet_after_s,
                "max_tail_s": self.max_tail_s}

    @classmethod
    def from_json(cls, data: dict[str, Any], title: str = "") -> SessionConfig:
        """Inverse of :meth:`to_json` (keys a trace adds beside the configuration are ignored)."""
        oracle = OracleConfig.from_json(data.get("oracle") or {})
        mode = data.get("mode", "kame")
        return cls(mode="moshi" if mode == "moshi" else "kame", oracle=oracle,
                   forced_delay_ms=int(data.get("forced_delay_ms", 0)), seed=int(data.get("seed", 0)),
                   floor=str(data.get("floor", DEFAULT_FLOOR)),
                   quiet_after_s=float(data.get("quiet_after_s", 1.5)),
                   max_tail_s=float(data.get("max_tail_s", 15.0)), title=title)

    @classmethod
    def from_trace(cls, trace: SessionTrace, **changes: Any) -> SessionConfig:
        """The configuration a tandem trace was recorded with, with ``changes`` applied."""
        return dataclasses.replace(cls.from_json(trace.config, title=trace.title), **changes)
