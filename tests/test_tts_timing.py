"""Sentence splitting, phoneme-to-word timing, and the ONNX alignment patch."""
from __future__ import annotations

import pytest

from kame_core.tts.onnx_alignment import AlignmentPatchError, add_alignment_output
from kame_core.tts.piper_tts import default_voice_paths
from kame_core.tts.word_timing import TimedPhoneme, split_sentences, words_from_phonemes


@pytest.mark.parametrize("text, sentences", [
    ("Hello. How are you? Fine!", ["Hello.", "How are you?", "Fine!"]),
    ("Dr. Smith went to Washington D.C. yesterday. He liked it.",
     ["Dr. Smith went to Washington D.C. yesterday.", "He liked it."]),
    ("Prices rose 3.5 percent. Then fell.", ["Prices rose 3.5 percent.", "Then fell."]),
    ("He said \"stop.\" Then he left", ["He said \"stop.\"", "Then he left"]),
    ("no ending punctuation", ["no ending punctuation"]),
    ("   ", []),
])
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


def timed(symbols: str, step: float = 0.1) -> list[TimedPhoneme]:
    return [TimedPhoneme(p, i * step, (i + 1) * step) for i, p in enumerate(symbols)]


def test_merged_function_words_are_split_back() -> None:
    # espeak says "in the house" as "ɪnðə hˈaʊs"; alone the words are "ˈɪn", "ðˈə", "hˈaʊs"
    words = words_from_phonemes(["in", "the", "house."], [list("ˈɪn"), list("ðˈə"), list("hˈaʊs")],
                                timed("ɪnðə hˈaʊs."))
    assert [w.text for w in words] == ["in", "the", "house."]
    assert (words[0].start, words[0].end) == pytest.approx((0.0, 0.2))
    assert (words[1].start, words[1].end) == pytest.approx((0.2, 0.4))
    assert (words[2].start, words[2].end) == pytest.approx((0.5, 1.0))


def test_unmatched_phonemes_go_to_the_word_that_matched_nothing() -> None:
    # "is a test": in context "a" is "ɐ", alone it is "ˈeɪ"
    words = words_from_phonemes(["is", "a", "test"], [list("ˈɪz"), list("ˈeɪ"), list("tˈɛst")],
                                timed("ɪz ɐ tˈɛst"))
    spans = [t for w in words for t in (w.start, w.end)]
    assert spans == pytest.approx([0.0, 0.2, 0.3, 0.4, 0.5, 1.0])


def test_words_without_any_sound_get_zero_length_at_the_boundary() -> None:
    words = words_from_phonemes(["yes", "—", "no"], [list("jˈɛs"), [], list("nˈoʊ")], timed("jˈɛs nˈoʊ"))
    assert words[1].start == words[1].end == words[0].end


def test_alignment_patch_adds_exactly_the_ceil_output() -> None:
    import onnxruntime

    model_path, _ = default_voice_paths()
    original = model_path.read_bytes()
    patched = add_alignment_output(original)
    assert len(patched) > len(original)
    session = onnxruntime.InferenceSession(patched, providers=["CPUExecutionProvider"])
    outputs = [o.name for o in session.get_outputs()]
    assert len(outputs) == 2 and "Ceil" in outputs[1]
    with pytest.raises(AlignmentPatchError, match="already"):
        add_alignment_output(patched)
    with pytest.raises(AlignmentPatchError):
        add_alignment_output(b"\x08\x07")  # a valid protobuf with no graph
