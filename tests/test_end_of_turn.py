"""The semantic end-of-turn detector: SmolLM2's probability that the words end the turn or a sentence, on
hand-made transcripts, and the rule that combines it with silence."""
from __future__ import annotations

import math

import pytest

from kame_core.llm.smollm_model import cpu_has_native_bf16
from kame_core.turns.end_of_turn import (
    MAX_WORDS,
    EndOfTurnConfig,
    SmolLMEndOfTurn,
    last_words,
    spoken_words,
    turn_is_over,
)

COMPLETE = ["What is the capital of France?", "Tell me about the weather in London tomorrow.",
            "Who wrote Romeo and Juliet?", "Is this your first time doing this?"]
FRAGMENTS = ["What is the capital of", "Who wrote", "so um", "I was thinking that maybe we could",
             "Could you tell me how to?"]  # Whisper punctuates partials as it likes: the mark is not read


@pytest.fixture(scope="module")
def detector() -> SmolLMEndOfTurn:
    return SmolLMEndOfTurn().load()


@pytest.mark.slow  # loads SmolLM2
def test_complete_turns_score_above_every_fragment(detector: SmolLMEndOfTurn) -> None:
    complete = [detector.probability(t) for t in COMPLETE]
    fragments = [detector.probability(t) for t in FRAGMENTS]
    assert all(0.0 <= p <= 1.0 for p in complete + fragments)
    # the words of a finished sentence are likely to be closed (0.15 to 0.9); a fragment's are not (< 0.02)
    assert min(complete) > 5 * max(fragments), (complete, fragments)
    assert all(turn_is_over(p, 0.0) for p in complete) and not any(turn_is_over(p, 1.0) for p in fragments)


@pytest.mark.slow
def test_the_same_words_score_the_same_and_only_the_end_of_a_long_turn_is_read(detector: SmolLMEndOfTurn) -> None:
    assert detector.probability("  What is the capital   of France? ") == detector.probability(COMPLETE[0])
    assert detector.probability("what is the capital of France") == \
        detector.probability("what is the capital of, France!")
    assert spoken_words("Could you... tell me, how to?") == "Could you tell me how to"
    bomb = "blah " * 100_000 + "What is the capital of France?"
    assert detector.probability(bomb) == pytest.approx(detector.probability(last_words(bomb)))
    assert detector.probability("") == detector.probability("   ") == 0.0
    # a filled pause at the end holds the turn, whatever the words before it (the model alone reads 0.1 here)
    assert detector.probability("armor man what you do what you do before uh...") == 0.0
    assert detector.probability("Um, what is the capital of France?") >= EndOfTurnConfig().complete_p
    assert "untuned" in detector.provenance.label


def test_silence_ends_any_turn_and_a_complete_one_sooner() -> None:
    config = EndOfTurnConfig(complete_p=0.2, after_complete_s=0.2, any_turn_s=1.0)
    assert not turn_is_over(0.9, 0.1, config) and turn_is_over(0.9, 0.2, config)
    assert not turn_is_over(0.1, 0.9, config) and turn_is_over(0.1, 1.0, config)
    assert not turn_is_over(math.nan, 0.5, config) and turn_is_over(math.nan, 1.0, config)


def test_bad_settings_and_input_are_refused() -> None:
    for bad in ({"complete_p": 1.5}, {"complete_p": math.nan}, {"any_turn_s": -1.0}, {"after_complete_s": 1e9}):
        with pytest.raises(ValueError):
            EndOfTurnConfig(**bad)
    with pytest.raises(TypeError, match="text"):
        last_words(b"bytes")  # type: ignore[arg-type]
    assert len(last_words("w " * 500).split()) == MAX_WORDS


@pytest.mark.slow  # loads SmolLM2 twice
def test_bfloat16_scores_hold_to_the_float32_ones() -> None:
    full = SmolLMEndOfTurn(precision="float32").load()
    half = SmolLMEndOfTurn(precision="bfloat16").load()
    assert "(bfloat16)" in half.provenance.label and "(float32)" in full.provenance.label
    texts = COMPLETE + FRAGMENTS + [" ".join(t.split()[:k]) for t in COMPLETE for k in range(1, len(t.split()))]
    log_odds = [(math.log(p / (1 - p)), math.log(q / (1 - q)), p, q)
                for p, q in ((full._score(spoken_words(t)), half._score(spoken_words(t))) for t in texts)]
    gaps = sorted(abs(a - b) for a, b, _, _ in log_odds)
    # measured on 990 synthetic-set texts: 0.40 at worst; the gate's decision changed only within 0.004 of its cut
    assert gaps[-1] < 0.5 and gaps[len(gaps) // 2] < 0.15, gaps
    cut = EndOfTurnConfig().complete_p
    assert all((p >= cut) == (q >= cut) for _, _, p, q in log_odds if abs(p - cut) > 0.01)


def test_a_precision_is_named_and_bfloat16_found_in_cpuinfo(tmp_path) -> None:
    with pytest.raises(ValueError, match="precision 'fp8'"):
        SmolLMEndOfTurn(precision="fp8")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f\n")
    assert not cpu_has_native_bf16(cpuinfo)
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    assert cpu_has_native_bf16(cpuinfo) and not cpu_has_native_bf16(tmp_path / "missing")
