"""The neural front-end adapter end to end on CPU: random tiny KAME LM + random Mimi, 2 s of speech-like audio."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kame_core.clock import SAMPLE_RATE, SAMPLES_PER_FRAME
from kame_core.neural import NeuralFrontEnd, SentencePieceTokenizer, random_front_end
from kame_core.neural.configs import small_mimi_config, tiny_lm_kwargs
from kame_core.neural.tiny import train_tiny_tokenizer
from kame_core.protocols import FrontEnd, TextTokenizer
from kame_core.record.trace import FrameRecord, OracleToken, SessionTrace, iter_frames

VOCAB = 64


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tiny.model", VOCAB)


@pytest.fixture(scope="module")
def front_end(tokenizer_path: Path) -> NeuralFrontEnd:
    """Tiny random LM + Mimi of the published configuration (random weights, built without download)."""
    return random_front_end(tiny_lm_kwargs(text_card=VOCAB), tokenizer_path, seed=0)


def speech_like(seconds: float, voiced_until: float, seed: int = 0) -> np.ndarray:
    """A voiced signal with a wandering pitch, two formant-like bands and a syllable rhythm, then silence."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = 120 + 20 * np.sin(2 * np.pi * 1.3 * t)
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    weights = [np.exp(-((k * 120 - 700) / 300) ** 2) + 0.5 * np.exp(-((k * 120 - 1200) / 400) ** 2)
               for k in range(1, 30)]
    harmonics = sum(w * np.sin(k * phase) for k, w in enumerate(weights, start=1))
    envelope = np.clip(np.sin(2 * np.pi * 4 * t), 0, None) ** 0.5 * (t < voiced_until)
    noise = np.random.default_rng(seed).normal(0, 0.003, t.shape)
    audio = 0.3 * harmonics * envelope / np.abs(harmonics).max() + noise
    return audio.astype(np.float32)


def test_tokenizer_implements_the_protocol(tokenizer_path: Path) -> None:
    tok = SentencePieceTokenizer.from_file(tokenizer_path, start_token_id=VOCAB, padding_token_id=3)
    assert isinstance(tok, TextTokenizer)
    assert (tok.start_token_id, tok.padding_token_id, tok.vocab_size) == (VOCAB, 3, VOCAB)
    ids = tok.encode("hello there")
    assert "".join(tok.piece(i) for i in ids) == " hello there"
    assert tok.piece(3) == tok.piece(0) == tok.piece(VOCAB) == tok.piece(10_000) == ""
    assert tok.is_padding(3) and tok.is_padding(0) and not tok.is_padding(ids[0])


@pytest.mark.slow  # seconds of the tiny model with Mimi
def test_two_seconds_through_the_front_end(front_end: NeuralFrontEnd, tokenizer_path: Path) -> None:
    assert isinstance(front_end, FrontEnd)
    assert front_end.provenance.kind == "neural-random"
    tok = front_end.tokenizer
    user = speech_like(2.0, voiced_until=1.5)
    oracle_ids = tok.encode("the capital of France is Paris")[:6]
    # the runner's oracle stream: padding, the start token at frame 12, then one id per frame
    schedule: list[int | None] = [None] * 25
    schedule[12] = tok.start_token_id
    schedule[13:13 + len(oracle_ids)] = oracle_ids

    front_end.reset(seed=1)
    trace = SessionTrace(mode="kame")
    for i, frame in enumerate(iter_frames(user)):
        token = schedule[i]
        out = front_end.step(frame, token)
        fed = front_end.gen.oracle_last_fed
        assert fed == (tok.padding_token_id if token is None else token)
        assert out.audio.shape == (SAMPLES_PER_FRAME,) and out.audio.dtype == np.float32
        assert np.isfinite(out.audio).all()
        assert out.text_piece == ("" if out.text_token is None else tok.piece(out.text_token))
        oracle = OracleToken(token=token, piece="" if token is None else tok.piece(token),
                             revision=None if token is None else 1, is_start=i == 12)
        trace.append_frame(FrameRecord(out.text_piece, out.text_token, oracle), frame, out.audio)
    trace.finish()

    assert trace.n_frames == 25 and trace.user_audio.shape == trace.output_audio.shape == (2 * SAMPLE_RATE,)
    assert [i for i, f in enumerate(trace.frames) if not f.oracle.is_padding] == list(range(12, 13 + len(oracle_ids)))
    assert trace.frames[12].oracle.is_start and [f.oracle.token for f in trace.frames[13:19]] == oracle_ids
    assert trace.frames[0].text_is_padding and not trace.output_frame(0).any()  # acoustic delay
    assert np.abs(trace.output_audio[SAMPLES_PER_FRAME:]).max() > 0  # Mimi decoded something afterwards


@pytest.fixture(scope="module")
def small_front_end(tokenizer_path: Path) -> NeuralFrontEnd:
    return random_front_end(tiny_lm_kwargs(text_card=VOCAB), tokenizer_path, seed=0, mimi_config=small_mimi_config())


def _session(fe: NeuralFrontEnd, seed: int, hold: list[bool]) -> list:
    fe.reset(seed)
    user = speech_like(len(hold) * SAMPLES_PER_FRAME / SAMPLE_RATE, voiced_until=10)
    return [fe.step(frame, None, h) for frame, h in zip(iter_frames(user), hold)]


@pytest.mark.slow  # two sessions of the tiny model with Mimi
def test_reset_makes_sessions_reproducible(small_front_end: NeuralFrontEnd) -> None:
    first = _session(small_front_end, 7, [False] * 8)
    second = _session(small_front_end, 7, [False] * 8)
    assert [o.text_token for o in first] == [o.text_token for o in second]
    assert all(np.array_equal(a.audio, b.audio) for a, b in zip(first, second))


def test_hold_gives_silence_and_keeps_the_inner_monologue_silent(small_front_end: NeuralFrontEnd) -> None:
    hold = [True] * 6 + [False] * 3
    outs = _session(small_front_end, 3, hold)
    for out, held in zip(outs, hold):
        if held:
            assert out.text_piece == "" and out.text_token is None and not out.audio.any()
    # the text emitted right after the hold was sampled during the last held step: forced to padding
    assert outs[6].text_token is None


def test_step_checks_the_frame_size(small_front_end: NeuralFrontEnd) -> None:
    small_front_end.reset(0)
    with pytest.raises(ValueError, match="1920"):
        small_front_end.step(np.zeros(100, np.float32), None)


@pytest.mark.slow  # seconds of the tiny model through the whole runner
def test_tandem_runner_end_to_end_with_the_neural_front_end(front_end: NeuralFrontEnd) -> None:
    """Tiny random KAME LM + random Mimi through the tandem runner on 2 s of synthesized speech."""
    from kame_core.clock import FRAME_SECONDS, VirtualClock
    from kame_core.pipelines.tandem import TandemRunner
    from kame_core.record.trace import EventKind
    from kame_core.session.config import SessionConfig
    from kame_core.testing.doubles import ScriptedLLM, ScriptedSTT, words_at

    words = words_at("what is the capital", 0.1, per_word=0.3)
    user = speech_like(2.0, voiced_until=words[-1].end)
    llm = ScriptedLLM(lambda u: "the capital of france is paris", first_chunk_s=0.2)
    runner = TandemRunner(front_end, ScriptedSTT([words]), llm, SessionConfig(max_tail_s=0.5), VirtualClock())
    trace = runner.run_sync(user)
    assert trace.provenance["front_end"].kind == "neural-random"
    assert trace.n_frames >= 25 and len(trace.output_audio) == trace.n_frames * SAMPLES_PER_FRAME
    assert np.isfinite(trace.output_audio).all() and np.abs(trace.output_audio).max() > 0
    assert all(f.text_token is not None or f.text_piece == "" for f in trace.frames)
    tok = front_end.tokenizer
    resets = trace.events_of(EventKind.ORACLE_RESET)
    assert resets
    for reset in resets:
        rev = reset.data["revision"]
        frames = [i for i, f in enumerate(trace.frames) if f.oracle.revision == rev]
        assert trace.frames[frames[0]].oracle.token == tok.start_token_id
        assert 0 <= (frames[0] + 1) * FRAME_SECONDS - reset.t < FRAME_SECONDS + 1e-9
        appended = [t for e in trace.events_of(EventKind.ORACLE_APPEND) if e.data["revision"] == rev
                    for t in e.data["tokens"]]
        fed = [trace.frames[i].oracle.token for i in frames[1:]]
        assert fed == appended[: len(fed)]
