"""The text lanes of a run's panel: the STT's final words under the user waveform, the front-end's inner monologue
(a cascade's spoken words) joined into words, and its self-corrections; and the hover line of a piece's token id,
which the oracle's pieces share."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kame_core.analysis.trace_query import join_words, self_corrections
from kame_core.clock import FRAME_SECONDS
from kame_core.record.events import SttFinal, payloads
from kame_core.record.trace import SessionTrace
from kame_core.serve.page.palette import INK, VERMILLION

from .canvas import Canvas, esc, hover_template, pack, text_width_s, wrap

__all__ = ["STAND_IN_TOKEN_NOTE", "correction_marks", "is_stand_in_run", "monologue", "token_lines", "user_words"]

#: what a hover says in place of a token id for the CPU stand-in front-end: it has no text vocabulary, and the
#: ids in its trace are hashes of whole words (:class:`kame_core.frontends.tokenizer.HashedWordTokenizer`)
STAND_IN_TOKEN_NOTE = "stand-in word, no token id"
#: the name of a cascade's words in the third lane (it has no front-end, so no inner monologue)
_CASCADE_WORD = "TTS word"


def is_stand_in_run(trace: SessionTrace) -> bool:
    """Whether the run's front-end is the CPU stand-in (its provenance says so; never guessed from ids)."""
    front = trace.provenance.get("front_end")
    return front is not None and front.kind == "cpu-stand-in"


def token_lines(trace: SessionTrace, tokens: Sequence[int | None], column: int) -> str | list[str]:
    """The hover line of each piece's token id (``customdata[column]``): none where a piece has no token, the
    stand-in's note for a stand-in run (its ids are word hashes, meaningless to a reader); one template when
    every piece says the same, else one per piece."""
    if is_stand_in_run(trace):
        return f"<br>{STAND_IN_TOKEN_NOTE}"
    line = f"<br>token id %{{customdata[{column}]}}"
    known = [t is not None for t in tokens]
    if all(known) or not any(known):
        return line if all(known) else ""
    return [line if k else "" for k in known]


def _words(pieces: Sequence[str]) -> list[tuple[int, str]]:
    """Per text piece: the index of its word's first piece and the word, escaped (:func:`kame_core.analysis.trace_query.
    join_words` joins sub-word pieces into words, so a word is printed, and found in hover, whole)."""
    return [(start, esc(word or "␣")) for start, word in join_words(pieces)]


def _abandoned_frames(trace: SessionTrace) -> dict[int, int]:
    """Frames whose words a self-correction took back -> the revision it switched to (as the front-end
    recorded them; runs recorded before front-ends reported the frames grey nothing)."""
    out: dict[int, int] = {}
    for _, correction in self_corrections(trace):
        for frame in correction.abandoned_frames:
            out.setdefault(frame, correction.revision or 0)
    return out


def user_words(c: Canvas) -> None:
    """The STT's final words with their audio times, under the user waveform: a tick per word (hover gives
    it), its text where it fits at the reference zoom; the rest go to "every word (close zoom)"."""
    words = [w for _, final in payloads(c.trace, SttFinal, lenient=True) for w in final.words or []
             if isinstance(w, (list, tuple)) and len(w) == 3]
    if not words:
        return
    starts = np.asarray([float(w[1]) for w in words], np.float32)
    texts = [esc(str(w[0])) for w in words]
    placed = np.asarray(pack(starts.tolist(), [text_width_s(t, 9.5, c.px_per_s) - 8 / c.px_per_s
                                               for t in texts], 1))
    y = c.row("user words")[0]
    c.traces.append(dict(
        type="scatter", mode="markers+text", x=starts, y=np.full(len(words), y, np.float32),
        text=[t if r >= 0 else "" for t, r in zip(texts, placed)], hovertext=texts,
        textposition="middle right", textfont=dict(size=9.5, color="#3f5f8a"),
        marker=dict(symbol="line-ns", size=6, opacity=np.where(placed >= 0, 0.7, 0.35).astype(np.float32),
                    line=dict(width=1, color="#3f5f8a")),
        customdata=np.asarray([[w[1], w[2]] for w in words], np.float32),
        hovertemplate="user said <b>%{hovertext}</b><br>%{customdata[0]:.2f}–%{customdata[1]:.2f} s"
                      "<extra>STT final words</extra>",
        showlegend=False, name=f"{c.run} · user words", **c.xy))
    c.label_groups.append(dict(traces=[c.traces[-1]], rows=[float(y)], font=9.5, labels=texts,
                               x=starts.tolist(), word=[list(range(len(words)))], lead=[[1] * len(words)],
                               min_px_per_s=0.0, note=None))
    hidden = np.flatnonzero(placed < 0)
    if hidden.size:
        c.traces.append(dict(
            type="scatter", mode="text", x=starts[hidden], y=np.full(hidden.size, y, np.float32),
            text=[texts[i] for i in hidden], textposition="middle right",
            textfont=dict(size=9.5, color="#3f5f8a"), hoverinfo="skip", visible="legendonly",
            **c.legend("every word (close zoom)"), **c.xy))
    c.hidden_note("user audio", int(hidden.size), "words", "every word (close zoom)", top=True)


def monologue(c: Canvas) -> None:
    """The front-end's text pieces at their frames (the cascade: the words its TTS speaks), joined into words
    for printing; abandoned words greyed; token ids in hover where they are real vocabulary ids."""
    spoken = [(i, f.text_piece) for i, f in enumerate(c.trace.frames) if not f.text_is_padding]
    if not spoken:
        return
    abandoned = _abandoned_frames(c.trace)
    frames = np.asarray([i for i, _ in spoken], np.int32)
    token_of = [c.trace.frames[i].text_token for i, _ in spoken]
    tokens = np.asarray([-1 if t is None else t for t in token_of], np.int64)
    replaced_by = np.asarray([abandoned.get(i, -1) for i, _ in spoken], np.int64)
    words = _words([p for _, p in spoken])
    texts = [esc(p.strip() or "␣") if words[k][0] == k and (k + 1 == len(words) or words[k + 1][0] != k)
             else f"{esc(p.strip() or '␣')} · of “{words[k][1]}”" for k, (_, p) in enumerate(spoken)]
    head = "<b>%{hovertext}</b><br>frame %{customdata[0]} · %{x:.2f} s"
    token = token_lines(c.trace, token_of, column=1)
    cascade = c.trace.mode == "cascade"
    name = _CASCADE_WORD if cascade else "inner monologue"
    hidden = c.pieces(
        frames, texts, c.row("monologue"), 11.5,
        groups=[dict(name=name, legend="spoken word (cascade)" if cascade else "inner-monologue piece",
                     colour=INK, ticks=INK),
                dict(name="abandoned in a self-correction", legend="abandoned (self-corrected)",
                     colour="#98a1ab", ticks="#98a1ab", style="italic",
                     hover=hover_template(head, token, "<br>abandoned when oracle rev %{customdata[2]} arrived"
                                                       "<extra>{label}</extra>"))],
        group_of=np.asarray([int(i in abandoned) for i, _ in spoken]),
        customdata=np.stack([frames, tokens, replaced_by], 1),
        hover=hover_template(head, token, "<extra>{label}</extra>"),
        all_pieces_name="every word (close zoom)", words=words)
    c.hidden_note("inner monologue", hidden, "words", "every word (close zoom)")


def correction_marks(c: Canvas) -> None:
    """Each self-correction: a dotted line up the inner-monologue lane at its frame, and a marker whose hover says
    what the front-end had said and the oracle revision it switched to."""
    F = FRAME_SECONDS
    corrections = self_corrections(c.trace)
    if not corrections:
        return
    cx, hover = [], []
    lo, hi = c.lanes.band("inner monologue")
    correction_y = c.row("correction")
    for _, fix in corrections:
        frame, rev, new = fix.frame or 0, fix.revision, fix.new_text  # self_corrections sets every frame
        cx.append(frame * F)
        hover.append(f"<b>self-correction</b> · frame {frame} · {frame * F:.2f} s<br>"
                     f"had said: “{wrap(fix.abandoned_text, 56)}”<br>"
                     f"switched to oracle rev {rev if rev is not None else '?'}"
                     + (f": “{wrap(new, 56)}”" if new.strip() else ""))
        c.shapes.append(dict(type="line", xref=c.ax.x, yref=c.ax.y, x0=frame * F, x1=frame * F,
                             y0=lo + 0.08, y1=correction_y, line=dict(color=VERMILLION, width=1.5, dash="dot")))
    c.traces.append(dict(type="scatter", mode="markers", x=cx, y=[correction_y] * len(cx),
                         marker=dict(symbol="triangle-down", size=10, color=VERMILLION,
                                     line=dict(width=0.8, color="white")),
                         hovertext=hover, hoverinfo="text", **c.legend("self-correction"), **c.xy))
