"""Smart Turn v3.2 (kame_core.turns.smart_turn) read from the installed pipecat-ai wheel, and the ``smart-turn`` floor
policy on Piper speech: held through a pause that sounds unfinished, released once the sentence sounds complete, from
the audio alone (the scripted transcript is never scored)."""
from __future__ import annotations

import numpy as np
import pytest

from kame_core.audio_io import resample
from kame_core.clock import SAMPLE_RATE, VirtualClock
from kame_core.pipelines.tandem import TandemRunner
from kame_core.record import events as ev
from kame_core.record.trace import EventKind
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedSTT, Word
from kame_core.turns.floor_policies import FLOORS
from kame_core.turns.floor_policies.smart_turn import SMART_TURN_CONFIG
from kame_core.turns.smart_turn import MODEL_RATE, WINDOW_S, SmartTurn, SmartTurnUnavailable, last_window, wheel_file

pytestmark = pytest.mark.slow  # Piper, Silero VAD, the ONNX model

LEAD_S, PAUSE_S, TAIL_S = 0.3, 1.2, 2.0


@pytest.fixture(scope="module")
def smart_turn() -> SmartTurn:
    return SmartTurn().load()


@pytest.fixture(scope="module")
def piper():
    from kame_core.tts import make_tts

    return make_tts("piper")


@pytest.fixture(scope="module")
def paused_sentence(piper) -> tuple[np.ndarray, list[list[Word]], float, float]:
    """Piper saying "I was thinking about" ... (a pause) ... "the weather in Paris.", then silence; the words a
    streaming STT would give; the end of the first part and of the sentence."""
    first, second = (piper.synthesize(text).audio for text in ("I was thinking about", "the weather in Paris."))
    silence = [np.zeros(int(s * SAMPLE_RATE), np.float32) for s in (LEAD_S, PAUSE_S, TAIL_S)]
    audio = np.concatenate([silence[0], first, silence[1], second, silence[2]]).astype(np.float32)
    first_end = LEAD_S + len(first) / SAMPLE_RATE
    end = first_end + PAUSE_S + len(second) / SAMPLE_RATE
    step = (first_end - LEAD_S) / 4
    words = [[Word(w, LEAD_S + step * i, LEAD_S + step * (i + 1))
              for i, w in enumerate("I was thinking about".split())],
             [Word(w, end - 1.0 + 0.25 * i, end - 0.75 + 0.25 * i)
              for i, w in enumerate("the weather in Paris.".split())]]
    return audio, words, first_end, end


def _at_16k(audio: np.ndarray, silence_s: float = 0.2) -> np.ndarray:
    return np.concatenate([resample(audio, SAMPLE_RATE, MODEL_RATE), np.zeros(int(silence_s * MODEL_RATE), np.float32)])


def test_a_finished_question_sounds_complete_and_a_cut_off_phrase_does_not(smart_turn, piper):
    finished = smart_turn.probability(_at_16k(piper.synthesize("What is the capital of France?").audio))
    cut_off = smart_turn.probability(_at_16k(piper.synthesize("I was thinking about").audio))
    assert finished >= SMART_TURN_CONFIG.complete_p > cut_off, (finished, cut_off)
    assert 0.0 <= cut_off <= 1.0 and 0.0 <= finished <= 1.0
    prov = smart_turn.provenance
    assert prov.kind == "end-of-turn" and prov.model_id == "smart-turn-v3.2-cpu.onnx"
    assert "pipecat-ai 1.14" in prov.version
    with pytest.raises(ValueError, match="NaN or infinite"):
        smart_turn.probability(np.array([0.0, np.nan], np.float32))


def test_the_model_hears_the_last_8_s_silence_in_front_when_shorter():
    n = int(WINDOW_S * MODEL_RATE)
    short = np.ones(100, np.float32)
    window = last_window(short)
    assert len(window) == n and window[-100:].sum() == 100 and not window[:-100].any()
    long = np.arange(n + 50, dtype=np.float32)
    assert np.array_equal(last_window(long), long[50:])


def test_a_missing_wheel_file_says_how_to_install_it():
    with pytest.raises(SmartTurnUnavailable, match=r"no pipecat/nothing.onnx: install it with `pip install --no-deps "
                                                   r"pipecat-ai==1.14.0`"):
        wheel_file("pipecat/nothing.onnx")
    assert wheel_file("pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx").stat().st_size > 8_000_000


def test_the_smart_turn_floor_holds_through_an_unfinished_pause_and_lets_go_after_the_sentence(smart_turn,
                                                                                            paused_sentence):
    audio, words, first_end, end = paused_sentence
    config = SessionConfig(mode="moshi", floor="smart-turn", max_tail_s=TAIL_S, title="floor smart-turn")
    with pytest.raises(ValueError, match="needs an audio end-of-turn detector"):
        TandemRunner(EchoFrontEnd(), ScriptedSTT(words), None, config, VirtualClock())
    runner = TandemRunner(EchoFrontEnd(), ScriptedSTT(words), None, config, VirtualClock(),
                          end_of_turn_audio=smart_turn)
    trace = runner.run_sync(audio)

    assert trace.config["floor"] == "smart-turn" and trace.config["floor_settings"]["complete_p"] == 0.5
    assert trace.provenance["end_of_turn_audio"].model_id == "smart-turn-v3.2-cpu.onnx"
    assert "end_of_turn" not in trace.provenance  # no transcript was scored
    scores = [p for _, p in ev.payloads(trace, ev.EndOfTurn)]
    assert all(p.by == "audio" and p.audio_to_s is not None for p in scores), scores
    # one score a pause, asked on the frame its audio went quiet (a frame before the VAD's end) or at its onset; a
    # quiet inside a word may ask one more, dropped when the voice goes on
    in_pause = min(scores, key=lambda p: abs(p.audio_to_s - first_end))
    at_end = scores[-1]
    assert len(scores) <= 3 and in_pause is not at_end, scores
    # (a Piper clip ends in its own near-silence: the quiet may come before the clip's end)
    assert abs(in_pause.audio_to_s - first_end) < 0.5 and abs(at_end.audio_to_s - end) < 0.5, scores
    assert in_pause.p_end < 0.5 <= at_end.p_end, scores
    holds = [(e.kind, e.t, e.data) for e in trace.events_of(EventKind.HOLD_START, EventKind.HOLD_END)]
    released = [t for kind, t, _ in holds if kind is EventKind.HOLD_END]
    assert released and all(not (first_end < t < end) for t in released), holds  # never in the pause
    assert end < released[-1] < end + 0.6, (end, holds)  # given on the pause after the sentence, by its sound
    assert holds[-1][2]["p_end_audio"] >= 0.5 and holds[-1][2]["floor"] == "smart-turn"
    assert set(FLOORS) >= {"smart-turn"} and FLOORS["smart-turn"].policy.scores_audio

    # the Timeline's floor lane draws the sound's probability (dashed) and its threshold; the exports name it
    from demo.figures.lanes import LaneLayout
    from demo.figures.timeline import timeline_figure
    from kame_core.export.tiers import events

    lanes = LaneLayout(("user audio", "floor", "output audio"))
    fig = timeline_figure(trace, lanes=lanes).to_plotly_json()
    line = next(t for t in fig["data"] if t.get("name") == "end-of-turn probability of the sound (log scale)")
    assert line["line"]["dash"] == "dash" and len(line["hovertext"]) == len(scores) + 1
    assert f"by the sound up to {scores[0].audio_to_s:.2f} s (Smart Turn" in line["hovertext"][0]
    assert not any(t.get("name") == "end-of-turn probability (log scale)" for t in fig["data"])  # no words scored
    texts = [a["text"] for a in fig["layout"]["annotations"]]
    assert "floor: smart-turn" in texts and "gives the floor at p ≥ 0.5" in texts
    labels = [p.text for p in events(trace)]
    assert sum(label.endswith("(by the sound)") for label in labels) == len(scores), labels


def test_the_fused_rule_combines_words_and_sound_and_refuses_bad_settings():
    from kame_core.turns.floor_policies.fused import FusedConfig, FusedFloor, fused_holds, fused_is_over

    both, either = FusedConfig(text_p=0.1, audio_p=0.5), FusedConfig(text_p=0.1, audio_p=0.5, combine="or")
    nan = float("nan")
    for p_text, p_audio, want_and, want_or in ((0.2, 0.9, True, True), (0.2, 0.1, False, True),
                                               (0.01, 0.9, False, True), (0.01, 0.1, False, False),
                                               (nan, 0.9, False, True), (nan, nan, False, False)):
        assert fused_is_over(p_text, p_audio, 0.1, both) is want_and, (p_text, p_audio)
        assert fused_is_over(p_text, p_audio, 0.1, either) is want_or, (p_text, p_audio)
    assert fused_is_over(nan, nan, 2.4, both)  # a long silence ends the turn whatever they say
    assert not fused_is_over(0.9, 0.9, 0.05, FusedConfig(after_complete_s=0.08))
    assert fused_holds(True, None, 1.0, 1.0, either) and not fused_holds(False, None, 0.0, 0.0, either)
    for bad in ({"text_p": float("nan")}, {"audio_p": 1.5}, {"combine": "xor"}, {"any_turn_s": -1.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            FusedConfig(**bad)
    floor = FusedFloor()
    assert floor.words.listener is floor.sound.listener is floor.listener  # one VAD hears the user for both
    assert floor.settings()["combine"] == "and" and FLOORS["fused"].policy is FusedFloor


def test_the_fused_floor_reads_both_and_records_both(smart_turn, paused_sentence):
    from kame_core.turns.end_of_turn import SmolLMEndOfTurn

    audio, words, first_end, end = paused_sentence
    config = SessionConfig(mode="moshi", floor="fused", max_tail_s=TAIL_S, title="floor fused")
    runner = TandemRunner(EchoFrontEnd(), ScriptedSTT(words), None, config, VirtualClock(),
                          end_of_turn=SmolLMEndOfTurn().load(), end_of_turn_audio=smart_turn)
    trace = runner.run_sync(audio)
    assert {"end_of_turn", "end_of_turn_audio"} <= set(trace.provenance)
    scores = [p for _, p in ev.payloads(trace, ev.EndOfTurn)]
    assert any(p.by == "audio" for p in scores) and any(p.by is None for p in scores)
    assert trace.config["floor_settings"]["combine"] == "and"
    holds = [(e.kind, e.t, e.data) for e in trace.events_of(EventKind.HOLD_START, EventKind.HOLD_END)]
    released = [(t, d) for kind, t, d in holds if kind is EventKind.HOLD_END]
    assert released and all(not (first_end < t < end) for t, _ in released), holds  # never in the pause
    assert end < released[-1][0] < end + 0.6, holds
    assert {"p_end", "p_end_audio"} <= set(released[-1][1]), released[-1]  # what the decision rested on


def test_a_served_stack_runs_every_path_of_a_first_session_before_it_comes(piper):
    """served_stack (what a server does before /readyz answers) speaks a question through a KAME session: the floor
    scores words and sound, the oracle LLM answers, the TTS speaks -- none of it is left for the first caller."""
    from kame_core.protocols import Synthesis
    from kame_core.record.trace import Provenance
    from kame_core.stacks.served import WARM_QUESTION, served_stack
    from kame_core.stacks.stack import Stack
    from kame_core.testing.doubles import ScriptedLLM, words_at

    class Recorded:
        """An end-of-turn detector double that keeps what it was asked."""

        provenance = Provenance(kind="test-double", model_id="recorded")

        def __init__(self, p: float) -> None:
            self.p, self.loaded = p, 0
            self.asked: list[object] = []

        def load(self) -> Recorded:
            self.loaded += 1
            return self

        def probability(self, what) -> float:
            self.asked.append(what)
            return self.p

    class SpokenTTS:
        provenance, said = piper.provenance, []

        def synthesize(self, text: str) -> Synthesis:
            self.said.append(text)
            return piper.synthesize(text)

    words, sound, tts = Recorded(0.9), Recorded(0.9), SpokenTTS()
    llm = ScriptedLLM(lambda _: "Paris is the capital of France.")
    stack = Stack(make_stt=lambda: ScriptedSTT([words_at("what is the capital of france", 0.3)]),
                  make_front_end=EchoFrontEnd, llm=llm, tts=tts, end_of_turn=words, end_of_turn_audio=sound,
                  floor="fused")
    served_stack(stack)
    assert tts.said[0] == WARM_QUESTION and words.loaded == sound.loaded == 1
    assert llm.requests, "the oracle LLM never generated"
    assert words.asked and "france" in words.asked[-1].lower(), words.asked
    assert sound.asked and max(map(len, sound.asked)) > 16_000  # the question's sound at 16 kHz (over 1 s)
