"""One way to read a trace: the facts every view, metric and tool derives from its events and frames.

Derive a fact once, here, and call it everywhere (the timeline, the inspector, the forced-delay sweep, the
eval, the bundled-scenario recorder and the metrics all do):

* :func:`llm_requests`     -- each LLM request: start, first chunk, how it ended (finish / cancel / error /
  still open), the text it streamed, the transcript it was asked with, the oracle revision it became;
* :func:`oracle_revisions` -- each oracle revision: the request behind it, when it reset the stream, the frames
  its tokens were fed at, its text (all of it, and what was fed), the transcript it came from, its hint level;
* :func:`hint_levels`      -- each revision's hint level as recorded (HINT_LEVEL events; read, never worked out);
* :func:`request_spoken_ratios` -- the spoken ratio of each LLM request (:mod:`kame_core.analysis.hint_levels`),
  which :func:`kame_core.analysis.metrics.record_hint_levels` records levels from;
* :func:`revision_at`      -- the revision the front-end had been fed by a frame, and what of it;
* :func:`self_corrections` -- each self-correction: its frame, the revision heard, the frames abandoned;
* :func:`user_turns`       -- the user's turns (speech segments grouped by the one turn rule);
* :func:`join_words`       -- text pieces joined into words (a neural front-end's sub-word tokens).

Events are read as their typed payloads (:mod:`kame_core.record.events`). Payloads are validated when a trace is loaded
(:mod:`kame_core.record.schema`); a trace made in memory is not, so these functions read it leniently (a missing
field reads None) and keep their checks on ids.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeGuard, cast

from ..clock import FRAME_SECONDS
from ..record import events as ev
from ..record.trace import Event, EventKind, SessionTrace
from ..turns.tracker import TurnConfig, UserTurn, group_turns
from .hint_levels import spoken_ratio

Outcome = Literal["finished", "cancelled", "error", "open"]
_END_KINDS = {EventKind.LLM_REQUEST_FINISH: "finished", EventKind.LLM_REQUEST_CANCEL: "cancelled",
              EventKind.LLM_ERROR: "error"}
#: the kinds whose payload names an LLM request
_REQUEST_KINDS = {EventKind.LLM_REQUEST_START, EventKind.LLM_FIRST_CHUNK, *_END_KINDS, EventKind.ORACLE_RESET,
                  EventKind.ORACLE_APPEND}


@dataclass(frozen=True)
class LLMRequest:
    """One request to the back-end LLM, its start matched with its first chunk and its end."""

    request: int
    start_t: float
    reason: str
    transcript: str
    transcript_t: float | None
    first_chunk_t: float | None
    end_t: float | None
    outcome: Outcome
    text: str
    revision: int | None
    error: str = ""
    #: cancelled after it had already been superseded (the back-end ignored the cancellation)
    late: bool = False
    #: the chunks that reached the oracle stream, as (session time, text)
    chunks: tuple[tuple[float, str], ...] = ()

    @property
    def duration_s(self) -> float | None:
        return None if self.end_t is None else self.end_t - self.start_t


@dataclass(frozen=True)
class OracleRevision:
    """One oracle revision: a reset of the oracle stream and the tokens that followed it."""

    revision: int
    request: int | None
    reset_t: float
    #: frame where its start token was fed (None: superseded before it reached the front-end)
    start_frame: int | None
    #: last frame one of its tokens was fed (None like ``start_frame``)
    last_frame: int | None
    #: everything appended to it (the chunks the LLM streamed for it)
    text: str
    #: what of it the front-end was actually fed (token pieces)
    fed_text: str
    #: the user transcript its request was made from, and when that transcript was known
    transcript: str
    transcript_t: float | None
    hint_level: int | None = None
    spoken_ratio: float | None = None
    outcome: Outcome = "open"

    @property
    def reached_front_end(self) -> bool:
        return self.start_frame is not None


def join_words(pieces: Sequence[str]) -> list[tuple[int, str]]:
    """Per text piece: the index of its word's first piece and the word (stripped; ``""`` for a piece of
    whitespace alone). A piece that does not start with whitespace continues the word before it -- a neural
    front-end's sub-word tokens " Can", "berra", "." make one word, "Canberra." -- so a word is read whole."""
    starts: list[int] = []
    for k, piece in enumerate(pieces):
        joins = k > 0 and piece[:1] != "" and not piece[:1].isspace() and pieces[k - 1].strip() != "" \
            and not pieces[k - 1][-1:].isspace()
        starts.append(starts[-1] if joins else k)
    text: dict[int, str] = {}
    for k, start in enumerate(starts):
        text[start] = text.get(start, "") + pieces[k]
    return [(start, text[start].strip()) for start in starts]


@dataclass(frozen=True)
class FramedWord:
    """A whole word of a stream of pieces: its text (stripped) and the frames of its first and last pieces."""

    text: str
    first_frame: int
    last_frame: int


def framed_words(pieces: Sequence[tuple[int, str]]) -> list[FramedWord]:
    """``(frame, piece)`` pairs (empty pieces left out) joined into words with :func:`join_words`, in order; a
    word of whitespace alone is no word."""
    pieces = [(frame, piece) for frame, piece in pieces if piece]
    words: dict[int, FramedWord] = {}
    for (frame, _), (start, word) in zip(pieces, join_words([piece for _, piece in pieces])):
        first = words.get(start)
        words[start] = FramedWord(word, frame if first is None else first.first_frame, frame)
    return [w for w in words.values() if w.text]


def front_end_words(trace: SessionTrace) -> list[FramedWord]:
    """The words the front-end said: its text pieces (padding left out) joined into words, each over the frames of
    its pieces -- what the exports' tiers, oracle adherence and the word diffs between runs all read."""
    return framed_words([(i, f.text_piece) for i, f in enumerate(trace.frames) if not f.text_is_padding])


def _clean(text: str) -> str:
    return " ".join(text.split())


def _str(value: object) -> str:
    """A text field of a payload, as ``str(data.get(name, ""))`` read it (absent: empty)."""
    return "" if value is None else str(value)


def llm_requests(trace: SessionTrace) -> list[LLMRequest]:
    """Every LLM request of the trace in start order, matched with its first chunk and its end."""
    starts: dict[int, tuple[Event, ev.LlmRequestStart]] = {}
    firsts: dict[int, Event] = {}
    ends: dict[int, tuple[Event, ev.Payload]] = {}
    revisions: dict[int, int] = {}
    chunks: dict[int, list[tuple[float, str]]] = {}
    for e in trace.events:
        if e.kind not in _REQUEST_KINDS:
            continue
        p = ev.payload_of(e, lenient=True)
        request = p.request  # type: ignore[attr-defined]  # every kind of _REQUEST_KINDS has one
        if not is_ident(request):
            continue
        if isinstance(p, ev.LlmRequestStart):
            starts.setdefault(request, (e, p))
        elif isinstance(p, ev.LlmFirstChunk):
            firsts.setdefault(request, e)
        elif e.kind in _END_KINDS:
            ends.setdefault(request, (e, p))
        elif isinstance(p, ev.OracleReset) and isinstance(p.revision, int):
            revisions.setdefault(request, p.revision)
        elif isinstance(p, ev.OracleAppend):
            chunks.setdefault(request, []).append((e.t, _str(p.text)))
    out = []
    for request, (start_e, start) in starts.items():
        end_e, end = ends.get(request, (None, None))
        first = firsts.get(request)
        revision = revisions.get(request)
        end_revision = end.revision if isinstance(end, (ev.LlmRequestFinish, ev.LlmRequestCancel)) else None
        if revision is None and isinstance(end_revision, int):
            revision = end_revision
        out.append(LLMRequest(
            request=request, start_t=start_e.t, reason=_str(start.reason), transcript=_str(start.transcript),
            transcript_t=_opt_float(start.transcript_t), first_chunk_t=None if first is None else first.t,
            end_t=None if end_e is None else end_e.t,
            outcome="open" if end_e is None else _END_KINDS[end_e.kind],  # type: ignore[arg-type]
            # an error's text is an extra field (an imported official log records what the stream had said)
            text=_clean(str(end_e.data.get("text", ""))) if end_e is not None else "",
            revision=revision, error=_str(end.error) if isinstance(end, ev.LlmError) else "",
            late=bool(end.late) if isinstance(end, ev.LlmRequestCancel) else False,
            chunks=tuple(chunks.get(request, ()))))
    return sorted(out, key=lambda r: (r.start_t, r.request))


def _opt_float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class TokenUse:
    """What became of one revision's oracle tokens: appended by its LLM stream, fed to the front-end (one per
    frame after its start token), and still pending when the trace ends or a newer revision replaced it."""

    revision: int
    #: tokens appended (None: the trace recorded the text only, no token ids)
    appended: int | None
    fed: int

    @property
    def pending(self) -> int | None:
        return None if self.appended is None else max(0, self.appended - self.fed)


def oracle_token_use(trace: SessionTrace) -> dict[int, TokenUse]:
    """Per revision: oracle tokens appended, fed to the front-end, left pending (:class:`TokenUse`)."""
    appended: dict[int, int | None] = {}
    for _, reset in ev.payloads(trace, ev.OracleReset, lenient=True):
        if isinstance(reset.revision, int):
            appended.setdefault(reset.revision, 0)
    for _, append in ev.payloads(trace, ev.OracleAppend, lenient=True):
        rev, tokens = append.revision, append.tokens
        if not isinstance(rev, int):
            continue
        known = appended.get(rev, 0)
        appended[rev] = None if known is None or not isinstance(tokens, list) else known + len(tokens)
    fed: dict[int, int] = {}
    for f in trace.frames:
        o = f.oracle
        if not o.is_padding and not o.is_start and o.revision is not None:
            fed[o.revision] = fed.get(o.revision, 0) + 1
    return {rev: TokenUse(rev, appended.get(rev), fed.get(rev, 0)) for rev in sorted({*appended, *fed})}


def oracle_revisions(trace: SessionTrace) -> list[OracleRevision]:
    """Every oracle revision in reset order (live and recorded runs, and imported training dialogues)."""
    fed_frames: dict[int, list[int]] = {}
    fed_text: dict[int, list[str]] = {}
    start_frame: dict[int, int] = {}
    for i, f in enumerate(trace.frames):
        rev = f.oracle.revision
        if rev is None:
            continue
        fed_frames.setdefault(rev, []).append(i)
        if f.oracle.is_start:
            start_frame.setdefault(rev, i)
        elif not f.oracle.is_padding:
            fed_text.setdefault(rev, []).append(f.oracle.piece)
    appended: dict[int, list[str]] = {}
    for _, append in ev.payloads(trace, ev.OracleAppend, lenient=True):
        if isinstance(append.revision, int):
            appended.setdefault(append.revision, []).append(_str(append.text))
    requests = {r.request: r for r in llm_requests(trace)}
    levels = hint_levels(trace)
    out = []
    for e, reset in ev.payloads(trace, ev.OracleReset, lenient=True):
        rev = reset.revision
        if not is_ident(rev):
            continue
        request_id = reset.request
        request = requests.get(request_id) if isinstance(request_id, int) else None
        text = "".join(appended.get(rev, [])) or str(reset.text or "")
        frames = fed_frames.get(rev, [])
        level, ratio = levels.get(rev, (None, None))
        out.append(OracleRevision(
            revision=rev, request=request_id if isinstance(request_id, int) else None, reset_t=e.t,
            start_frame=start_frame.get(rev, frames[0] if frames else None),
            last_frame=frames[-1] if frames else None, text=_clean(text),
            fed_text=_clean("".join(fed_text.get(rev, []))),
            transcript=request.transcript if request else str(reset.transcript or ""),
            transcript_t=request.transcript_t if request else None,
            hint_level=level, spoken_ratio=ratio,
            outcome=request.outcome if request else "open"))
    return out


def hint_levels(trace: SessionTrace) -> dict[int, tuple[int, float | None]]:
    """Each revision's hint level and spoken ratio as recorded: the last HINT_LEVEL event of each revision
    (:func:`kame_core.analysis.metrics.record_hint_levels` writes them; nothing here works a level out). Files saved
    before levels were events carry them on their ORACLE_RESET events: read from there where no event tells one."""
    out: dict[int, tuple[int, float | None]] = {}
    for _, reset in ev.payloads(trace, ev.OracleReset, lenient=True):
        if is_ident(reset.revision) and is_ident(reset.hint_level):
            out[reset.revision] = (reset.hint_level, _opt_float(reset.spoken_ratio))
    for _, level in ev.payloads(trace, ev.HintLevel, lenient=True):
        if is_ident(level.revision) and is_ident(level.hint_level):
            out[level.revision] = (level.hint_level, _opt_float(level.spoken_ratio))
    return out


def is_ident(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a whole number (an id, a level; not a bool) -- a trace made in memory is not checked."""
    return isinstance(value, int) and not isinstance(value, bool)


def _utterance_ends(trace: SessionTrace) -> tuple[list[int], list[int]]:
    """Per STT final in event order: the cumulative user words once it is in; and per utterance the cumulative
    user words at its end (strictly increasing). Utterances are the user's turns when the trace has
    voice-activity events (a final belongs to the last turn begun by its time), else single finals."""
    finals = ev.payloads(trace, ev.SttFinal, lenient=True)
    turns = user_turns(trace)
    cumulative: list[int] = []
    ends: list[int] = []
    total = 0
    group_of_previous: int | None = None
    for k, (e, final) in enumerate(finals):
        total += len(_str(final.text).split())
        cumulative.append(total)
        group = k if not turns else max(0, sum(turn.start <= e.t for turn in turns) - 1)
        if ends and group == group_of_previous:
            ends[-1] = total
        else:
            ends.append(total)
        group_of_previous = group
    strictly: list[int] = []
    for end in ends:  # utterances whose finals were all empty add no words: they are no utterance
        if not strictly or end > strictly[-1]:
            strictly.append(end)
    if strictly and strictly[0] == 0:
        strictly.pop(0)
    return cumulative, strictly


def request_spoken_ratios(trace: SessionTrace) -> dict[int, float]:
    """Spoken ratio of every LLM request whose utterance has its final transcript in the trace (requests
    without a recorded transcript, or whose utterance never got a final, are left out); see
    :mod:`kame_core.analysis.hint_levels` for the definition."""
    cumulative, ends = _utterance_ends(trace)
    out: dict[int, float] = {}
    finals_seen = 0
    for e in trace.events:
        if e.kind is EventKind.STT_FINAL:
            finals_seen += 1
        elif e.kind is EventKind.LLM_REQUEST_START:
            start = cast(ev.LlmRequestStart, ev.payload_of(e, lenient=True))
            transcript, request = start.transcript, start.request
            if not isinstance(transcript, str) or not isinstance(request, int) or request in out:
                continue
            committed = cumulative[finals_seen - 1] if finals_seen else 0
            ratio = spoken_ratio(len(transcript.split()), committed, ends)
            if ratio is not None:
                out[request] = ratio
    return out


@dataclass(frozen=True)
class RevisionAt:
    """The revision the front-end had been fed by a frame, and the part of it fed by then."""

    revision: OracleRevision
    fed_text: str


def revision_at(trace: SessionTrace, frame: int, revisions: list[OracleRevision] | None = None) -> RevisionAt | None:
    """The newest revision whose tokens reached the front-end at or before ``frame`` (None: no oracle yet)."""
    frame = min(frame, trace.n_frames - 1)
    current = None
    for i in range(frame, -1, -1):
        current = trace.frames[i].oracle.revision
        if current is not None:
            break
    if current is None:
        return None
    pieces = [f.oracle.piece for f in trace.frames[: frame + 1]
              if f.oracle.revision == current and not f.oracle.is_start and not f.oracle.is_padding]
    found = next((r for r in (revisions if revisions is not None else oracle_revisions(trace))
                  if r.revision == current), None)
    if found is None:  # fed tokens without a reset event (hand-made traces): describe it from the frames
        found = OracleRevision(revision=current, request=None, reset_t=frame * FRAME_SECONDS, start_frame=None,
                               last_frame=None, text=_clean("".join(pieces)), fed_text=_clean("".join(pieces)),
                               transcript="", transcript_t=None)
    return RevisionAt(revision=found, fed_text=_clean("".join(pieces)))


def self_corrections(trace: SessionTrace) -> list[tuple[float, ev.SelfCorrection]]:
    """Every self-correction the front-end reported, in time order: its time and its payload (the frame of the
    switch always set; a text that is not one, or a revision that is not an int, read as absent)."""
    out = []
    for e, c in ev.payloads(trace, ev.SelfCorrection):
        out.append((e.t, ev.SelfCorrection(
            frame=int(e.frame if c.frame is None else c.frame),
            abandoned_text=_str(c.abandoned_text), abandoned_frames=[int(f) for f in c.abandoned_frames or []],
            revision=c.revision if isinstance(c.revision, int) else None, new_text=_str(c.new_text))))
    return out


def speech_segments(trace: SessionTrace) -> list[tuple[float, float]]:
    """(start, end) audio times of the user's speech segments, from the voice-activity events."""
    segments: list[tuple[float, float]] = []
    start: float | None = None
    for event in trace.events_of(EventKind.USER_SPEECH_START, EventKind.USER_SPEECH_END):
        if event.kind is EventKind.USER_SPEECH_START:
            start = event.audio_t
        elif start is not None:
            segments.append((start, event.audio_t))
            start = None
    return segments


def user_turns(trace: SessionTrace, turn_gap_s: float = TurnConfig.turn_gap_s) -> list[UserTurn]:
    """The user's turns: speech segments grouped by :func:`~kame_core.turns.tracker.group_turns`."""
    return group_turns(speech_segments(trace), turn_gap_s)


#: output quieter than this RMS (-60 dBFS) over the whole run counts as silence
_SILENT_RMS = 1e-3


def problems(trace: SessionTrace) -> list[str]:
    """What went wrong in a run, in words a user can act on (empty when nothing did): no speech heard, back-end
    errors (how many, and the first message), a KAME run that never received an oracle, a silent assistant."""
    found: list[str] = []
    heard = any(_str(p.text).strip() for _, p in ev.payloads(trace, ev.SttFinal, lenient=True)) or \
        any(_str(p.text).strip() for _, p in ev.payloads(trace, ev.SttPartial, lenient=True))
    if not speech_segments(trace) and not heard:
        found.append("no speech was heard in the input (silence, noise or too short)")
    errors = ev.payloads(trace, ev.LlmError, lenient=True)
    if errors:
        event, error = errors[0]
        # ``message``: an extra field, read first as it always was (no writer here gives one)
        first = str(event.data.get("message") or error.error or "no message")[:200]
        found.append(f"the LLM back-end failed {len(errors)} time(s) (first: {first})")
    if trace.mode == "kame" and heard and not trace.events_of(EventKind.ORACLE_RESET):
        found.append("no oracle reached the front-end")
    spoke = any(not f.text_is_padding for f in trace.frames)
    audio = trace.output_audio
    loud = audio.size > 0 and float((audio.astype("float64") ** 2).mean()) ** 0.5 > _SILENT_RMS
    if not spoke and not loud:
        found.append("the assistant stayed silent")
    return found
