"""The provenance badge: one plain sentence saying what produced a run, taken from its trace.

Users compare runs made by very different machinery (trained KAME weights, the CPU stand-in, test doubles,
recorded files, imported training dialogues). A figure that does not say which is which invites
over-reading a stand-in as the real model, so every run in the visualiser carries this badge. The words
come from :data:`kame_core.record.trace.PROVENANCE_KINDS` only, worded by
:func:`kame_core.record.provenance.describe_run` (the exports say it the same way): nothing here may call a run
"neural KAME" unless its front-end provenance kind is ``neural-kame``.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

from kame_core.record.provenance import ORIGIN_KINDS, describe_kind, describe_run
from kame_core.record.trace import Provenance, SessionTrace

__all__ = ["Badge", "describe_kind", "provenance_badge"]

#: component keys shown in the detail line, in pipeline order
_COMPONENTS = (("front_end", "front-end"), ("stt", "STT"), ("llm", "LLM"), ("tts", "TTS"), ("vad", "VAD"))

#: badge fill per headline kind: tinted so neural, stand-in and replayed runs read differently at a glance
_TINTS = {
    "neural-kame": "#e3f1ea", "neural-moshi": "#e3f1ea", "neural-random": "#fbeee0",
    "cpu-stand-in": "#fbf3dc", "recorded": "#e6eef8", "imported-training-dialogue": "#e6eef8",
    "imported-official-log": "#e6eef8",
    "test-double": "#eeeeee",
}


@dataclass(frozen=True)
class Badge:
    """What produced a run: ``headline`` (plain sentence: what generated the speech), ``origin`` (how the run
    reached us, when it was not computed now), ``details`` (components), ``kind`` (the headline's kind)."""

    headline: str
    details: str
    kind: str
    origin: str = ""

    @property
    def tint(self) -> str:
        return _TINTS.get(self.kind, "#eeeeee")

    def plain(self) -> str:
        return " — ".join(x for x in (self.headline, self.origin, self.details) if x)

    def html(self, run_name: str | None = None, width_chars: int = 180) -> str:
        """Badge text for a Plotly annotation (its small HTML subset); every trace-supplied string escaped.

        The headline, then what made the run in lines of at most ``width_chars`` characters (broken between
        its " · " parts), so the badge stays inside its panel."""
        name = f"<b>{html.escape(run_name)}</b> · " if run_name else ""
        text = f"{name}{html.escape(self.headline)}"
        parts = [p for x in (self.origin, self.details) if x for p in x.split(" · ")]
        if parts:
            lines = _wrap_parts(parts, width_chars)
            shown = [html.escape(line) for line in lines]
            if self.origin:  # the origin (recorded / computed now) in bold: it is the first part
                shown[0] = f"<b>{html.escape(parts[0])}</b>" + html.escape(lines[0][len(parts[0]):])
            second = "<br>".join(shown)
            text += f"<br><span style='font-size:10.5px;color:#4b5563'>{second}</span>"
        return text


def _wrap_parts(parts: list[str], width_chars: int) -> list[str]:
    """Join ``parts`` with " · " into lines no longer than ``width_chars`` (a longer part gets its own line)."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= width_chars:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    return lines


def _component(label: str, p: Provenance) -> str:
    name = p.model_id or p.label or describe_kind(p.kind)
    version = f" {p.version}" if p.version else ""
    kind = "" if p.kind in ("stt", "llm", "tts", "vad") or name == describe_kind(p.kind) else f" ({p.kind})"
    return f"{label}: {name}{version}{kind}"


def provenance_badge(trace: SessionTrace, *, recorded: bool = False) -> Badge:
    """The badge of one run.

    The headline is the front-end's kind (what generated the speech); a cascade has no front-end and says
    so. A run replayed from a file (``recorded=True``, or a ``recorded`` / ``imported-training-dialogue``
    provenance entry in the trace) says that first, because nothing in it was computed now.
    """
    prov = trace.provenance
    run = describe_run(trace, recorded=recorded)
    parts = [_component(label, prov[key]) for key, label in _COMPONENTS if key in prov]
    parts += [_component(key, p) for key, p in prov.items()
              if key not in dict(_COMPONENTS) and p.kind not in ORIGIN_KINDS]
    return Badge(headline=run.headline, details=" · ".join(parts), kind=run.kind, origin=run.origin)
