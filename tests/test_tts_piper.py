"""Piper TTS: 24 kHz output, plausible durations, word timings from phoneme alignments, sentence streaming."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from kame_core.clock import SAMPLE_RATE
from kame_core.protocols import TTS, Synthesis
from kame_core.tts import PiperTTS, make_tts

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser

TEXT = ("Hello there, this is a test of forty-two words. Dr. Smith lives in the U.S.A. and likes it! "
        "What do you think about the weather in Paris today?")


@pytest.fixture(scope="module")
def tts() -> PiperTTS:
    return PiperTTS()


@pytest.fixture(scope="module")
def synthesis(tts: PiperTTS) -> Synthesis:
    return tts.synthesize(TEXT)


def assert_timings_sane(s: Synthesis, text: str) -> None:
    duration = len(s.audio) / SAMPLE_RATE
    assert [w.text for w in s.words] == text.split()
    for w in s.words:
        assert 0.0 <= w.start <= w.end <= duration + 1e-9, w
    for a, b in zip(s.words, s.words[1:]):
        assert a.end <= b.start + 1e-9, (a, b)


def test_24khz_float_audio_at_a_plausible_rate(tts: PiperTTS, synthesis: Synthesis) -> None:
    assert isinstance(tts, TTS)
    assert synthesis.audio.dtype == np.float32 and synthesis.audio.ndim == 1
    assert 0.05 < float(np.abs(synthesis.audio).max()) <= 1.0
    duration = len(synthesis.audio) / SAMPLE_RATE
    assert 1.8 <= len(TEXT.split()) / duration <= 4.5  # conversational speech: ~2.5-3.5 words/s
    raw = np.concatenate([c.audio_float_array for c in tts.voice.synthesize(TEXT, syn_config=tts._syn_config)])
    assert abs(len(synthesis.audio) - len(raw) * SAMPLE_RATE / tts.sample_rate) < 0.01 * SAMPLE_RATE


def test_word_timings_come_from_alignments_and_are_monotonic(tts: PiperTTS, synthesis: Synthesis) -> None:
    assert tts.aligned and "phoneme alignments" in tts.provenance.label
    assert_timings_sane(synthesis, TEXT)
    words = {w.text: w for w in synthesis.words}
    assert words["forty-two"].end - words["forty-two"].start > words["a"].end - words["a"].start
    assert all(w.end > w.start for w in synthesis.words), "every word should get some audio"
    assert words["there,"].end < words["this"].start - 0.1  # the comma's pause lies between the words


def test_words_sit_on_audible_audio(synthesis: Synthesis) -> None:
    """Energy inside the words' spans is well above energy in the pauses between them."""
    mask = np.zeros(len(synthesis.audio), bool)
    for w in synthesis.words:
        mask[int(w.start * SAMPLE_RATE):int(w.end * SAMPLE_RATE)] = True
    inside = float(np.sqrt(np.mean(synthesis.audio[mask] ** 2)))
    outside = float(np.sqrt(np.mean(synthesis.audio[~mask] ** 2)))
    assert inside > 2 * outside


def test_sentence_streaming_is_lazy_and_matches_whole_synthesis(tts: PiperTTS, synthesis: Synthesis) -> None:
    stream = tts.stream_sentences(TEXT)
    assert inspect.isgenerator(stream)
    parts = list(stream)
    assert len(parts) == 3  # "Dr." and "U.S.A." do not end sentences
    for part in parts:
        assert_timings_sane(part, " ".join(w.text for w in part.words))
    assert sum(len(p.audio) for p in parts) == len(synthesis.audio)
    np.testing.assert_array_equal(np.concatenate([p.audio for p in parts]), synthesis.audio)  # deterministic


def test_phoneme_count_fallback_without_alignments() -> None:
    plain = PiperTTS(alignments=False)
    assert not plain.aligned and "phoneme counts" in plain.provenance.label
    s = plain.synthesize("Good morning, how are you?")
    assert_timings_sane(s, "Good morning, how are you?")


def test_make_tts_prefers_piper() -> None:
    assert isinstance(make_tts("auto"), PiperTTS)
    with pytest.raises(ValueError):
        make_tts("festival")


def test_a_sentence_spoken_again_is_not_synthesized_again_and_each_caller_gets_its_own_copy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kame_core.tts import piper_tts

    monkeypatch.setattr(piper_tts, "KEPT_SENTENCES", 2)
    tts = PiperTTS()
    made: list[str] = []
    synthesize = tts.voice.synthesize

    def counted(text, *args, **kwargs):
        made.append(text)
        return synthesize(text, *args, **kwargs)

    monkeypatch.setattr(tts.voice, "synthesize", counted)
    first = tts.synthesize("Paris is the capital. It is in France.")
    first.audio[:] = 0.0  # a caller that writes into its audio changes nobody else's
    again = tts.synthesize("Paris is the capital. It is in France.")
    assert made == ["Paris is the capital.", "It is in France."]  # each sentence synthesized once
    assert np.abs(again.audio).max() > 0.05 and again.words == tts.synthesize("Paris is the capital. It is in "
                                                                               "France.").words
    tts.synthesize("A third sentence.")  # two kept: the oldest ("Paris is the capital.") goes
    tts.synthesize("Paris is the capital.")
    assert made == ["Paris is the capital.", "It is in France.", "A third sentence.", "Paris is the capital."]
    noisy = PiperTTS(deterministic=False)  # it samples noise: each time anew, nothing kept
    monkeypatch.setattr(noisy.voice, "synthesize", counted)
    noisy.synthesize("It is in France.")
    noisy.synthesize("It is in France.")
    assert made[-2:] == ["It is in France.", "It is in France."]
