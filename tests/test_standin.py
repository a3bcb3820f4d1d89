"""The CPU stand-in front-end: self-correction, speech rate, hold, audio placement, determinism, honesty."""
from __future__ import annotations

import numpy as np
import pytest

from kame_core.analysis.metrics import session_metrics
from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE, SAMPLES_PER_FRAME, VirtualClock
from kame_core.frontends import HashedWordTokenizer, StandInConfig, StandInFrontEnd, cut_words
from kame_core.frontends.standin import first_contradiction
from kame_core.pipelines.tandem import TandemRunner
from kame_core.protocols import FrontEnd, FrontEndOutput, Synthesis, TextTokenizer, Word
from kame_core.record.trace import EventKind, Provenance
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import ScriptedLLM, ScriptedSTT, ToneTTS, dominant_pitch, loud, speech_like, words_at

SILENT = np.zeros(SAMPLES_PER_FRAME, np.float32)


class Drive:
    """Steps a front-end by hand: oracle revisions are queued and fed one token per frame."""

    def __init__(self, front_end: StandInFrontEnd) -> None:
        self.fe = front_end
        self.tok = front_end.tokenizer
        self.pending: list[int | None] = []
        self.outputs: list[FrontEndOutput] = []
        self.holds: list[bool] = []

    def oracle(self, text: str, gap: int = 0) -> None:
        """A new oracle revision, as the oracle manager feeds it: the start token, then its tokens, with
        ``gap`` padding frames after each (a slowly streaming LLM)."""
        self.pending = [self.tok.start_token_id]
        for token in self.tok.encode(text):
            self.pending += [token] + [None] * gap

    def drain(self) -> None:
        """Step until the current oracle revision has been fed completely."""
        self.step(len(self.pending))

    def step(self, n: int = 1, hold: bool = False) -> None:
        for _ in range(n):
            token = self.pending.pop(0) if self.pending else None
            self.outputs.append(self.fe.step(SILENT, token, hold))
            self.holds.append(hold)

    def until_said(self, word: str, limit: int = 400) -> None:
        for _ in range(limit):
            if word in self.text().split():
                return
            self.step()
        raise AssertionError(f"never said {word!r}: {self.text()!r}")

    def text(self) -> str:
        return " ".join("".join(o.text_piece for o in self.outputs).split())

    def word_frames(self) -> list[int]:
        return [i for i, o in enumerate(self.outputs) if o.text_piece]

    def corrections(self):
        return [(i, o.self_correction) for i, o in enumerate(self.outputs) if o.self_correction is not None]

    def audio(self) -> np.ndarray:
        return np.concatenate([o.audio for o in self.outputs])


def stand_in(**kw) -> StandInFrontEnd:
    kw.setdefault("background", False)
    return StandInFrontEnd(kw.pop("tts", None) or ToneTTS(), **kw)


# ------------------------------------------------------------------------------------------- tokenizer
def test_word_tokenizer_rebuilds_text_across_chunk_boundaries():
    tok = HashedWordTokenizer()
    assert isinstance(tok, TextTokenizer)
    assert tok.start_token_id == 1 and tok.padding_token_id == 3
    chunks = ["The capi", "tal of France ", "is  Paris,\nof course. "]
    ids = [i for c in chunks for i in tok.encode(c)]
    assert "".join(tok.piece(i) for i in ids) == "The capital of France is Paris, of course. "
    assert tok.start_token_id not in ids and tok.padding_token_id not in ids
    other = HashedWordTokenizer()  # ids are stable across instances, vocabularies are per instance
    assert other.encode("is  Paris,\nof course. ") == tok.encode("is  Paris,\nof course. ")
    assert HashedWordTokenizer().piece(ids[0]) == f"<{ids[0]}>"
    assert tok.encode(" Paris,") == [ids[ids.index(tok.encode(" Paris,")[0])]]


# ------------------------------------------------------------------------------------- self-correction
def test_self_corrects_when_a_newer_oracle_contradicts_what_was_said():
    d = Drive(stand_in())
    d.oracle("The capital of Australia is Sydney, a big harbour city. ")
    d.until_said("Sydney,")
    assert not d.corrections()
    d.oracle("The capital of Australia is Canberra, in the south east. ")
    d.step(150)
    (frame, correction), = d.corrections()
    assert correction.revision == 2
    assert correction.abandoned_text.startswith("The capital of Australia is Sydney,")
    assert "Canberra" in correction.new_text
    # it switches mid-sentence: a repair, then the new oracle's sentence again from its start (a clean sentence,
    # not "... no, wait, Canberra, in the south east.")
    before, after = d.text().split("Sydney,", 1)
    assert before.strip() == "The capital of Australia is"
    words_after = after.split()
    assert words_after[-10:] == "The capital of Australia is Canberra, in the south east.".split()
    assert len(words_after) - 10 <= 4, "at most a word already under way and a short repair"
    switch = d.outputs[frame].text_piece.strip()  # reported at the audible switch: the repair's first word
    assert switch in {r.split()[0] for r in StandInConfig().repairs}


def test_no_correction_when_the_newer_oracle_extends_what_was_said():
    d = Drive(stand_in())
    d.oracle("The capital of France is Paris. ")
    d.until_said("of")
    d.oracle("The capital of France is Paris, on the river Seine. ")
    d.step(150)
    assert not d.corrections()
    assert d.text() == "The capital of France is Paris, on the river Seine."


def test_restarted_oracle_that_agrees_lets_it_talk_on():
    """The oracle manager restarts streams as the user talks; a restart cut short is not a contradiction,
    and the front-end keeps saying the longer answer it already knows."""
    d = Drive(stand_in())
    d.oracle("The capital of France is Paris, a city on the Seine. ")
    d.drain()
    for _ in range(3):
        d.oracle("The capital of ")
        d.step(8)
    d.step(150)
    assert not d.corrections()
    assert d.text() == "The capital of France is Paris, a city on the Seine."


def test_contradiction_only_in_words_not_yet_said_is_no_correction():
    d = Drive(stand_in())
    d.oracle("It is about three hundred kilometres away. ")
    d.until_said("is")  # "four" arrives before "three" is due
    d.oracle("It is about four hundred kilometres away. ")
    d.step(150)
    assert not d.corrections()
    assert d.text() == "It is about four hundred kilometres away."


def test_first_contradiction_ignores_case_and_punctuation():
    assert first_contradiction(["Paris,"], ["paris."]) is None
    assert first_contradiction(["The", "capital"], ["The"]) is None
    assert first_contradiction(["The", "capital", "is", "Lyon"], ["The", "capital", "is", "Paris"]) == 3


# ---------------------------------------------------------------------------------------------- rate
@pytest.mark.parametrize("words_per_s", [2.6, 3.0, 3.4])
def test_speaks_at_a_natural_rate(words_per_s):
    answer = ("Paris is the capital of France and its largest city, home to about two million people "
              "and famous for its museums, its cafes and the tower built for the fair of eighteen eighty nine.")
    d = Drive(stand_in(words_per_s=words_per_s, tts=ToneTTS(per_char_s=0.005)))
    d.oracle(answer + " ")
    d.step(250)
    assert d.text() == answer
    frames = d.word_frames()
    rate = (len(frames) - 1) / ((frames[-1] - frames[0]) * FRAME_SECONDS)
    assert 2.5 <= rate <= 3.5 and rate == pytest.approx(words_per_s, rel=0.08), rate


def test_slow_tts_is_never_cut_or_overlapped():
    d = Drive(stand_in(tts=ToneTTS(per_char_s=0.06)))  # long words: the TTS pace sets the rate
    d.oracle("Extraordinarily complicated circumstances everywhere. ")
    d.step(150)
    assert d.text() == "Extraordinarily complicated circumstances everywhere."
    frames = d.word_frames()
    for a, b in zip(frames, frames[1:]):
        assert (b - a) * FRAME_SECONDS >= 0.1 + 0.06 * len("complicated") - FRAME_SECONDS


# ---------------------------------------------------------------------------------------------- hold
def test_hold_is_silent_but_keeps_consuming_the_oracle():
    d = Drive(stand_in())
    d.oracle("Yes, the museum opens at nine in the morning. ")
    d.step(30, hold=True)
    assert not d.pending, "every oracle token was consumed during the hold"
    assert all(o.text_piece == "" and not o.audio.any() for o in d.outputs)
    d.step(100)
    assert d.text() == "Yes, the museum opens at nine in the morning."
    assert d.word_frames()[0] == 30, "speaks as soon as the hold ends (the phrase was prepared during it)"


def test_hold_mid_answer_stops_at_once_and_resumes():
    d = Drive(stand_in())
    d.oracle("One two three four five six seven eight. ")
    d.until_said("three")
    held_from = len(d.outputs)
    d.step(20, hold=True)
    assert all(not o.audio.any() and not o.text_piece for o in d.outputs[held_from:])
    d.step(100)
    assert d.text().split()[-1] == "eight."


# ----------------------------------------------------------------------------------- audio placement
def test_audio_is_the_words_placed_where_they_are_spoken():
    tts = ToneTTS()
    d = Drive(stand_in(tts=tts))
    d.oracle("Tokyo is the capital of Japan. ")
    d.step(80)
    audio = d.audio()
    frames = d.word_frames()
    assert len(frames) == 6
    for i in frames:  # a word's text frame is loud, and the next frame plays that word's own tone
        word = d.outputs[i].text_piece.strip()
        assert loud(d.outputs[i].audio)
        assert dominant_pitch(d.outputs[i + 1].audio) == pytest.approx(ToneTTS.pitch(word), abs=15)
    first_loud = next(i for i, o in enumerate(d.outputs) if loud(o.audio))
    last_loud = max(i for i, o in enumerate(d.outputs) if loud(o.audio))
    assert first_loud == frames[0]
    assert last_loud - frames[-1] <= 3, "no audio long after the last word"
    # at the TTS's own pace, the speech is exactly the TTS audio of the phrase, cut and laid end to end
    fast_tts = ToneTTS()
    fast = Drive(stand_in(tts=fast_tts, words_per_s=10))
    fast.oracle("Tokyo is the capital of Japan. ")
    fast.step(80)
    assert " ".join(fast_tts.calls) == "Tokyo is the capital of Japan."  # once per phrase, not per word
    pieces = [p for call in fast_tts.calls for p in cut_words(ToneTTS().synthesize(call), call.split())]
    start = fast.word_frames()[0] * SAMPLES_PER_FRAME
    expected = np.concatenate([p.audio for p in pieces])
    np.testing.assert_array_equal(fast.audio()[start:start + len(expected)], expected)
    assert not audio[:frames[0] * SAMPLES_PER_FRAME].any()


def test_cut_words_falls_back_when_timings_do_not_match():
    syn = Synthesis(np.ones(SAMPLE_RATE, np.float32), [Word("forty-two", 0.1, 0.9)])
    pieces = cut_words(syn, ["forty", "two"])
    assert [p.text for p in pieces] == ["forty", "two"] and all(len(p.audio) > 0.2 * SAMPLE_RATE for p in pieces)


# ------------------------------------------------------------------------------------- determinism
def drive_session(seed: int, background: bool) -> Drive:
    d = Drive(stand_in(seed=seed, background=background))
    d.fe.reset(seed)
    d.oracle("The tallest mountain is K2, in Pakistan. ", gap=3)  # slow: an opener comes first
    d.until_said("K2,")
    d.oracle("The tallest mountain is Everest, in Nepal. ")
    d.step(120)
    return d


def test_deterministic_under_a_seed_with_or_without_threads():
    a, b, c = drive_session(7, False), drive_session(7, False), drive_session(7, True)
    for other in (b, c):
        assert [o.text_piece for o in a.outputs] == [o.text_piece for o in other.outputs]
        np.testing.assert_array_equal(a.audio(), other.audio())
    assert len(a.corrections()) == 1
    firsts = {drive_session(seed, False).text().split()[0] for seed in range(8)}
    assert len(firsts) > 1, "the opener is chosen under the seed"
    c.fe.close()


# -------------------------------------------------------------------------------------------- honesty
def test_provenance_never_claims_the_trained_model():
    fe = stand_in()
    assert isinstance(fe, FrontEnd)
    assert fe.provenance.kind == "cpu-stand-in"
    assert "not the trained model" in fe.provenance.label
    text = repr(fe.provenance).lower()
    assert "sakana" not in text and "kyutai" not in text and "neural" not in text
    trace = run_tandem(fe)[0]
    assert trace.provenance["front_end"].kind == "cpu-stand-in"
    assert all(p.kind not in ("neural-kame", "neural-moshi") for p in trace.provenance.values())


# ------------------------------------------------------------------------------------ in a session
QUESTION = "what is the capital city of australia"


def changing_answer(user: str) -> str:
    """An LLM double that guesses wrong until it has heard the whole question."""
    if "australia" in user:
        return "The capital of Australia is Canberra, not Sydney."
    return "The capital is Sydney, a big harbour city."


def run_tandem(fe, runner_cls=TandemRunner, delay_ms=0, mode="kame", answer=changing_answer, with_stt=True, **llm):
    seg = [words_at(QUESTION, 0.5)]
    audio = speech_like([(seg[0][0].start, seg[0][-1].end)], seg[0][-1].end + 1.0)
    stt = ScriptedSTT(seg) if with_stt else None
    runner = runner_cls(fe, stt, ScriptedLLM(answer, **llm) if mode == "kame" else None,
                        SessionConfig(mode=mode, forced_delay_ms=delay_ms), VirtualClock())
    return runner.run_sync(audio), seg


def test_tandem_session_records_the_self_correction():
    trace, _ = run_tandem(stand_in())
    corrections = trace.events_of(EventKind.SELF_CORRECTION)
    assert len(corrections) == 1
    final = "The capital of Australia is Canberra, not Sydney."
    assert "Sydney" in corrections[0].data["abandoned_text"]
    assert final.startswith(corrections[0].data["new_text"])
    assert trace.spoken_text().endswith("Canberra, not Sydney.")
    m = session_metrics(trace)
    assert m.self_corrections == 1 and m.oracle_revisions > 1
    assert m.onset_latency_s is not None and m.onset_latency_s < 0, "speaks before the user finished"


def test_tandem_session_with_forced_delay():
    trace, seg = run_tandem(stand_in(), delay_ms=1000)
    onset = session_metrics(trace).onsets[0]
    assert onset.latency_s is not None and onset.latency_s >= 1.0 - FRAME_SECONDS
    assert trace.spoken_text().endswith("The capital of Australia is Canberra, not Sydney.")
    assert not trace.events_of(EventKind.SELF_CORRECTION), "held until the final oracle: nothing to correct"


def test_opener_when_the_oracle_is_late():
    """With the STT events (listening runner) it opens after the user's turn, before the late oracle."""
    trace, seg = run_tandem(stand_in(), first_chunk_s=2.5)
    first_reset = trace.events_of(EventKind.ORACLE_RESET)[0].frame
    text_frames = [i for i, f in enumerate(trace.frames) if f.text_piece]
    opener = trace.frames[text_frames[0]].text_piece.strip()
    assert opener in {w.split()[0] for w in StandInConfig().openers}
    assert seg[0][-1].end < text_frames[0] * FRAME_SECONDS < first_reset * FRAME_SECONDS
    assert trace.provenance["tts"].model_id == "tests.tone-tts"


def test_small_model_guess_is_corrected_by_the_oracle():
    guesses = []

    def guess(transcript: str) -> str:
        guesses.append(transcript)
        return "Sydney, I believe."

    trace, _ = run_tandem(stand_in(opener_llm=guess), first_chunk_s=3.0,
                          answer=lambda u: "Canberra is the capital of Australia.")
    assert guesses == [QUESTION]
    (correction,) = trace.events_of(EventKind.SELF_CORRECTION)
    assert correction.data["abandoned_text"].startswith("Sydney")
    assert trace.spoken_text().endswith("Canberra is the capital of Australia.")


def test_moshi_mode_answers_from_the_small_model_alone():
    heard = []

    def answer(transcript: str) -> str:
        heard.append(transcript)
        return "I think it is Canberra."

    fe = stand_in(answer_fn=answer, model_provenance=Provenance(kind="llm", model_id="tests.small-model"))
    trace, _ = run_tandem(fe, mode="moshi")
    assert heard == [QUESTION]
    assert all(f.oracle.is_padding for f in trace.frames) and "llm" not in trace.provenance
    assert trace.provenance["front_end_model"].model_id == "tests.small-model"
    assert trace.spoken_text().endswith("I think it is Canberra.")
    assert session_metrics(trace).onset_latency_s > 0, "Moshi mode without an oracle answers after the user"


def test_stand_in_without_stt_events_is_silent_in_moshi_mode():
    trace, _ = run_tandem(stand_in(answer_fn=lambda t: "Canberra."), mode="moshi", with_stt=False)
    assert trace.spoken_text() == ""


def test_a_new_turn_starts_a_fresh_answer_not_a_correction(runner_cls=TandemRunner):
    turn1 = words_at("what is two plus two", 0.5)
    turn2 = words_at("and times three", turn1[-1].end + 4.0)
    audio = speech_like([(s[0].start, s[-1].end) for s in (turn1, turn2)], turn2[-1].end + 1.0)
    llm = ScriptedLLM(lambda u: "Twelve." if u.startswith("and") else "Two plus two is four.")
    trace = runner_cls(stand_in(), ScriptedSTT([turn1, turn2]), llm, SessionConfig(), VirtualClock()).run_sync(audio)
    assert trace.spoken_text() == "Two plus two is four. Twelve."
    assert not trace.events_of(EventKind.SELF_CORRECTION)
    boundary, = trace.events_of(EventKind.TURN_BOUNDARY)
    assert boundary.data["assistant_said"] == "Two plus two is four."


@pytest.mark.slow  # runs on the real-time clock
def test_live_session_on_the_real_time_clock_never_waits_for_the_tts():
    from kame_core.clock import RealTimeClock

    seg = [words_at("hi there", 0.1, per_word=0.2)]
    audio = speech_like([(0.1, seg[0][-1].end)], seg[0][-1].end + 0.5)
    fe = StandInFrontEnd(ToneTTS())  # TTS in a background thread
    runner = TandemRunner(fe, ScriptedSTT(seg), ScriptedLLM(lambda u: "Hello there.", first_chunk_s=0.05),
                         SessionConfig(quiet_after_s=0.5), RealTimeClock())
    trace = runner.run_sync(audio)
    fe.close()
    assert fe.realtime, "the runner told it the session is live"
    assert trace.spoken_text().endswith("Hello there.")
    assert trace.config["clock"] == "real-time"
