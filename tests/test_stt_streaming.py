"""Streaming STT on Piper-synthesized speech: word error rate, partial cadence, final word timestamps."""
from __future__ import annotations

import numpy as np
import pytest

from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE
from kame_core.protocols import StreamingSTT, STTEvent, Word
from kame_core.record.trace import iter_frames
from kame_core.stt import WhisperStreamingSTT, word_error_rate
from kame_core.tts import PiperTTS

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser

SENTENCES = ["The quick brown fox jumps over the lazy dog.",
             "I would like to know what the weather will be like in London tomorrow.",
             "How many people live in Tokyo?"]
LEAD_S, GAP_S, TAIL_S = 0.6, 1.2, 1.0


@pytest.fixture(scope="module")
def recording() -> tuple[np.ndarray, list[list[Word]]]:
    """User audio: silence, sentence, silence, ... and each sentence's words in session time."""
    tts = PiperTTS()
    parts, words, t = [np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32)], [], LEAD_S
    for sentence in SENTENCES:
        s = tts.synthesize(sentence)
        parts += [s.audio, np.zeros(int(GAP_S * SAMPLE_RATE), np.float32)]
        words.append([Word(w.text, w.start + t, w.end + t) for w in s.words])
        t += len(s.audio) / SAMPLE_RATE + GAP_S
    parts.append(np.zeros(int(TAIL_S * SAMPLE_RATE), np.float32))
    return np.concatenate(parts), words


@pytest.fixture(scope="module")
def stt() -> WhisperStreamingSTT:
    return WhisperStreamingSTT()


@pytest.fixture(scope="module")
def events(stt: WhisperStreamingSTT, recording) -> list[tuple[float, STTEvent]]:
    """``(session time when the event came out, event)``: time = end of the frame that produced it."""
    audio, _ = recording
    stt.reset()
    out = []
    for i, frame in enumerate(iter_frames(audio)):
        out += [((i + 1) * FRAME_SECONDS, e) for e in stt.accept(frame)]
    out += [(len(audio) / SAMPLE_RATE, e) for e in stt.flush()]
    return out


def segments(events: list[tuple[float, STTEvent]]) -> list[list[STTEvent]]:
    out: list[list[STTEvent]] = []
    for _, e in events:
        if e.kind == "speech_start":
            out.append([])
        out[-1].append(e)
    return out


def test_protocol_and_provenance(stt: WhisperStreamingSTT) -> None:
    assert isinstance(stt, StreamingSTT)
    assert stt.provenance.kind == "stt" and "whisper" in stt.provenance.model_id
    assert stt.virtual_latency_s > 0


def test_one_segment_per_sentence_in_protocol_order(events) -> None:
    segs = segments(events)
    assert len(segs) == len(SENTENCES)
    for seg in segs:
        kinds = [e.kind for e in seg]
        assert kinds[0] == "speech_start" and kinds[-2:] == ["final", "speech_end"]
        assert set(kinds[1:-2]) == {"partial"}


def test_word_error_rate(events) -> None:
    finals = [e.text for seg in segments(events) for e in seg if e.kind == "final"]
    rates = [word_error_rate(ref, hyp) for ref, hyp in zip(SENTENCES, finals)]
    assert max(rates) <= 0.25, list(zip(finals, rates))
    assert word_error_rate(" ".join(SENTENCES), " ".join(finals)) <= 0.12


def test_partials_at_least_every_half_second_while_speaking(events) -> None:
    for seg in segments(events):
        start = seg[0].start
        ends = [start] + [e.end for e in seg if e.kind == "partial"]
        assert len(ends) >= 3
        assert max(np.diff(ends)) <= 0.5 + 1e-6, np.diff(ends)
        assert seg[-1].end - ends[-1] <= 0.5  # partials run until the user stops


def test_events_never_refer_to_audio_not_yet_fed(events) -> None:
    for emitted_at, e in events:
        assert max(e.start, e.end) <= emitted_at + 1e-6, (emitted_at, e)


def test_final_word_timestamps_are_inside_the_audio_and_near_the_spoken_words(events, recording) -> None:
    audio, spoken = recording
    duration = len(audio) / SAMPLE_RATE
    for seg, truth in zip(segments(events), spoken):
        final = next(e for e in seg if e.kind == "final")
        assert final.words and [w.text for w in final.words] == final.text.split()
        for w in final.words:
            assert 0 <= w.start <= w.end <= duration
        assert all(a.start <= b.start for a, b in zip(final.words, final.words[1:]))
        assert truth[0].start - 0.35 <= final.words[0].start and final.words[-1].end <= truth[-1].end + 0.35
        # where the recognized word count matches, starts agree with the TTS word timings (Whisper's
        # alignment runs ~0.1 s early)
        if len(final.words) == len(truth):
            diffs = [abs(a.start - b.start) for a, b in zip(final.words, truth)]
            assert float(np.median(diffs)) < 0.25, diffs
        assert seg[-1].end == pytest.approx(truth[-1].end, abs=0.3)  # speech_end at the end of the speech
        assert seg[0].start == pytest.approx(truth[0].start, abs=0.3)


def test_flush_closes_a_segment_cut_off_mid_speech(stt: WhisperStreamingSTT, recording) -> None:
    audio, spoken = recording
    cut = int((spoken[1][5].end) * SAMPLE_RATE)  # stop right after "I would like to know what"
    stt.reset()
    live = [e for frame in iter_frames(audio[:cut]) for e in stt.accept(frame)]
    assert [e.kind for e in live if e.kind != "partial"] == ["speech_start", "final", "speech_end",
                                                             "speech_start"]
    closing = stt.flush()
    assert [e.kind for e in closing] == ["final", "speech_end"]
    assert word_error_rate("The quick brown fox jumps over the lazy dog.", next(
        e.text for e in live if e.kind == "final")) <= 0.25
    assert word_error_rate("I would like to know what", closing[0].text) <= 0.34
    stt.reset()
    assert stt.flush() == []


def test_silence_gives_no_events(stt: WhisperStreamingSTT) -> None:
    stt.reset()
    noise = np.random.default_rng(0).normal(0, 0.003, 3 * SAMPLE_RATE).astype(np.float32)
    assert [e for frame in iter_frames(noise) for e in stt.accept(frame)] + stt.flush() == []


def test_decoder_encodes_only_the_audio_present(stt: WhisperStreamingSTT, recording) -> None:
    audio16k = np.zeros(2 * 16_000, np.float32)
    feats, content = stt.decoder.features(audio16k)
    assert feats.shape[-1] == (2 + stt.decoder.tail_pad_s) * 100 and content == 200  # not Whisper's 3000
    assert stt.decoder.features(audio16k, full_window=True)[0].shape[-1] == 3000


def test_cut_loop_keeps_the_words_before_a_repeated_trigram() -> None:
    from kame_core.stt.whisper_decode import cut_loop

    assert cut_loop("What is the what is the what is the") == "What is the"
    assert cut_loop("Who wrote Romeo and Juliet?") == "Who wrote Romeo and Juliet?"
