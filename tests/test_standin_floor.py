"""Turn-taking of the stand-in on real speech (Piper): it does not talk over the user."""
from __future__ import annotations

import numpy as np
import pytest

from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE, SAMPLES_PER_FRAME
from kame_core.frontends import StandInConfig, StandInFrontEnd
from kame_core.frontends.tokenizer import HashedWordTokenizer
from kame_core.testing.doubles import tone
from kame_core.tts import make_tts
from kame_core.turns.listener import UserFloor
from kame_core.turns.tracker import TurnConfig

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser


@pytest.fixture(scope="module")
def piper():
    return make_tts("piper")


def frames(audio: np.ndarray):
    n = len(audio) // SAMPLES_PER_FRAME
    return [audio[i * SAMPLES_PER_FRAME:(i + 1) * SAMPLES_PER_FRAME] for i in range(n)]


def padded(speech: np.ndarray, lead_s: float = 0.5, tail_s: float = 2.0) -> np.ndarray:
    z = lambda s: np.zeros(int(s * SAMPLE_RATE), np.float32)  # noqa: E731
    return np.concatenate([z(lead_s), speech, z(tail_s)])


def test_floor_follows_real_speech_and_the_transcript_ending(piper):
    speech = piper.synthesize("Could you tell me what the capital of France is?")
    audio = padded(speech.audio)
    floor = UserFloor()
    held = []
    for i, frame in enumerate(frames(audio)):
        floor.hear(frame, (i + 1) * FRAME_SECONDS)
        held.append(floor.user_holds_floor((i + 1) * FRAME_SECONDS, "what the capital of France is?"))
    end_s = 0.5 + speech.words[-1].end
    mid = [held[i] for i in range(len(held)) if 1.0 < (i + 1) * FRAME_SECONDS < end_s - 0.3]
    assert mid and all(mid)  # inside the question the user holds the floor (short gaps between words too)
    free_at = next(i for i in range(len(held)) if (i + 1) * FRAME_SECONDS > end_s and not held[i])
    assert (free_at + 1) * FRAME_SECONDS - end_s < 0.6  # yielded soon after a question mark
    assert not held[-1]


def test_a_pause_mid_sentence_needs_longer_than_after_a_question():
    cfg = TurnConfig()
    assert cfg.pause_needed("what is the capital?") < cfg.pause_needed("It is.") < cfg.pause_needed("what is the")


def test_tones_never_hold_the_floor():
    floor = UserFloor()
    for i, frame in enumerate(frames(tone(2.0))):
        floor.hear(frame, (i + 1) * FRAME_SECONDS)
        assert not floor.user_holds_floor((i + 1) * FRAME_SECONDS, "")


def test_the_stand_in_waits_for_the_user_to_finish_before_answering(piper):
    """An oracle that is ready while the user is still talking is spoken only once they yield."""
    question = piper.synthesize("Please tell me, which planet in our solar system is the largest one?")
    audio = padded(question.audio, tail_s=5.0)
    end_s = 0.5 + question.words[-1].end
    tokenizer = HashedWordTokenizer()
    oracle = [tokenizer.start_token_id, *tokenizer.encode(" Jupiter is the largest planet.")]
    fe = StandInFrontEnd(piper, tokenizer=tokenizer, background=False)
    spoken_at = []
    for i, frame in enumerate(frames(audio)):
        token = oracle[i - 12] if 12 <= i < 12 + len(oracle) else None  # the oracle arrives at ~1 s
        out = fe.step(frame, token)
        if out.text_piece.strip():
            spoken_at.append((i * FRAME_SECONDS, out.text_piece.strip()))
    assert spoken_at, "it never answered"
    assert spoken_at[0][0] >= end_s - 0.1, (spoken_at[0], end_s)  # not over the user
    assert spoken_at[0][0] < end_s + 1.0
    assert "Jupiter" in " ".join(w for _, w in spoken_at)

    fe_no_turns = StandInFrontEnd(piper, tokenizer=HashedWordTokenizer(), background=False,
                                  config=type(fe.config)(floor=None))
    tokenizer2 = fe_no_turns.tokenizer
    oracle2 = [tokenizer2.start_token_id, *tokenizer2.encode(" Jupiter is the largest planet.")]
    first = next(i for i, frame in enumerate(frames(audio))
                 if fe_no_turns.step(frame, oracle2[i - 12] if 12 <= i < 12 + len(oracle2) else None)
                 .text_piece.strip())
    assert first * FRAME_SECONDS < end_s - 1.0  # without turn-taking it talks over the user


def _released_at_end(fe: StandInFrontEnd, audio: np.ndarray, oracle: list[int],
                     release_s: float) -> list[tuple[int, str, float]]:
    """Step ``fe`` through ``audio`` held as a floor policy holds it (from the user's first word to ``release_s``),
    the user's speech start and the oracle (from ~1 s) fed; (frame, word, RMS of that frame's audio) of each word."""
    from kame_core.protocols import STTEvent

    fe.observe_stt(STTEvent("speech_start", start=0.5))
    said = []
    for i, frame in enumerate(frames(audio)):
        token = oracle[i - 12] if 12 <= i < 12 + len(oracle) else None
        out = fe.step(frame, token, hold=0.5 < (i + 1) * FRAME_SECONDS <= release_s)
        if out.text_piece.strip():
            said.append((i, out.text_piece.strip(), float(np.sqrt(np.mean(np.square(out.audio))))))
    return said


def test_under_a_floor_policy_it_answers_on_the_frame_it_is_released(piper):
    """The policy's hold is the one rule: the answer ready in time is said on the release frame, and with none ready
    an opener synthesized during the hold is (its own floor listener, which waits a pause more, is off)."""
    question = piper.synthesize("Please tell me, which planet in our solar system is the largest one?")
    audio = padded(question.audio, tail_s=3.0)
    end_s = 0.5 + question.words[-1].end
    release = int((end_s + 0.1) / FRAME_SECONDS)  # the frame a policy gives the floor on
    tokenizer = HashedWordTokenizer()
    answer = [tokenizer.start_token_id, *tokenizer.encode(" Jupiter is the largest planet.")]

    def run(own_floor: bool, oracle: list[int]) -> list[tuple[int, str, float]]:
        fe = StandInFrontEnd(piper, tokenizer=tokenizer, background=False)
        fe.own_floor = own_floor
        fe.reset(0)
        return _released_at_end(fe, audio, oracle, (release + 0.5) * FRAME_SECONDS)

    ready = run(False, answer)
    assert ready[0][:2] == (release, "Jupiter") and ready[0][2] > 0.01, ready[:3]  # heard on that frame
    silent_oracle = run(False, [])
    assert silent_oracle[0][0] == release and silent_oracle[0][2] > 0.01, silent_oracle[:3]
    assert " ".join(w for _, w, _ in silent_oracle) in StandInConfig().openers, silent_oracle  # nothing else to say
    own = run(True, answer)
    assert own[0][0] > release + 1, (own[:2], release)  # its own listener waited for a pause of its own
