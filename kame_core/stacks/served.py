"""What the live protocol serves, built from a :class:`~.stack.Stack`: KAME runners on each session's clock, the
models warmed before the first session, the admission of a neural model's pool slots."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..clock import SAMPLE_RATE, Clock
from ..neural.choice import FrontEndChoice, NeuralModels
from ..paths import ModelFiles
from ..session import SessionDriver, SessionGate
from ..session.driver import FrameOut
from ..settings import StackSettings
from ..turns.floor_policies import DEFAULT_FLOOR, FLOORS, check_floor
from .build import build_stack
from .stack import Stack

if TYPE_CHECKING:
    from ..llm.smollm_process import SmolLMProcess
    from ..stt.shared import SharedWhisper


@dataclass(frozen=True)
class ServedStack:
    """What sessions are built from: ``make_runner(clock)`` -> a fresh KAME runner; ``components`` in words;
    ``gate`` the admission of what the sessions share (a :class:`~kame_core.session.SessionGate`: the slots of a
    neural model's pool, shared with the app's other doors); ``neural`` the models, if any."""

    make_runner: Callable[[Clock], SessionDriver]
    components: str = ""
    gate: SessionGate | None = None
    #: the neural models sessions take pool slots of, if any
    neural: NeuralModels | None = None
    #: the shared Whisper every session's STT decodes through, if any (its counts: /metrics)
    stt_worker: SharedWhisper | None = None
    #: the worker process SmolLM2 generates in, if any (whether it answers: /readyz)
    llm_worker: SmolLMProcess | None = None

    def problem(self) -> str | None:
        """Why sessions would be served badly now (the oracle worker not answering), or None."""
        return self.llm_worker.problem() if self.llm_worker is not None else None


def stack_from_cpu(llm: str = "offline", tts: str = "auto", whisper_model: str | None = None,
                   small_model_openers: bool = True, front_end: FrontEndChoice | None = None,
                   files: ModelFiles | None = None, floor: str = DEFAULT_FLOOR) -> Callable[[], ServedStack]:
    """A ``load_stack`` for ``python -m kame_core.serve``: the stack of :func:`~.build.build_stack` (the CPU stack
    with ``files``; with ``front_end`` naming weights, KAME sessions take slots of its pool instead of the stand-in,
    and the pool's size bounds the sessions), served. A local oracle LLM is loaded with it (the handshake means the
    models are warm). ``floor``: the sessions' floor policy."""
    check_floor(floor)  # here, before any model loads
    settings = StackSettings(llm=llm, small_model=small_model_openers, front_end=front_end or FrontEndChoice(),
                             files=files or ModelFiles(), floor=floor)

    def load() -> ServedStack:
        return served_stack(build_stack(settings, tts=tts, whisper_model=whisper_model, realtime=True))

    return load


def served_stack(stack: Stack, gate: SessionGate | None = None) -> ServedStack:
    """What the protocol serves from a :class:`kame_core.stacks.stack.Stack`: KAME runners on the session's
    clock; the local oracle LLM warmed now (not in the first session); a neural stack's pool bounds it."""
    warm_stack(stack)
    if gate is None and stack.neural is not None:
        gate = pool_gate(stack.neural.pool("kame").capacity)
    return ServedStack(make_runner=lambda clock: stack.runner("kame", clock=clock), components=stack.summary(),
                       gate=gate, neural=stack.neural, stt_worker=stack.stt_worker, llm_worker=stack.llm_worker)


#: what the warm-up session hears: a question in the stack's own voice, between silences
WARM_QUESTION = "Hello, who are you?"


def warm_stack(stack: Stack) -> None:
    """Load and run every path a first session takes, before it comes (a server answers ``/readyz`` after this): the
    local oracle LLM and the floor's end-of-turn detectors loaded, then :data:`WARM_QUESTION` spoken by the stack's
    TTS through a KAME session on the virtual clock -- VAD, Whisper decoding speech, partials and finals, the floor's
    scoring of words and sound, the oracle LLM's first tokens reaching the front-end, which then stops the session
    (waiting for the whole answer doubled the warm-up; a pool slot is taken and given back). A session of silence
    warmed none of these, and the first caller paid for them (Full-Duplex-Bench's passes against
    ``serve --floor gate``: the first answer heard 0.63 s after the user stopped, later ones 0.33 s); with this
    warm-up the first caller waits as long as the later ones (``benchmarks/first_caller.py``: 0.49 -> 0.25 s)."""
    import numpy as np

    warm = getattr(stack.llm, "load", None)  # a local model loads on first use unless told now
    if callable(warm):
        warm()
    if FLOORS[stack.floor].policy.scores_transcripts and stack.end_of_turn is not None:
        stack.end_of_turn.load()  # the gate's detector answers the first session's first partial in time
    if FLOORS[stack.floor].policy.scores_audio and stack.end_of_turn_audio is not None:
        stack.end_of_turn_audio.load()
    spoken = np.asarray(stack.tts.synthesize(WARM_QUESTION).audio, np.float32).reshape(-1)
    audio = np.concatenate([np.zeros(SAMPLE_RATE // 4, np.float32), spoken, np.zeros(SAMPLE_RATE, np.float32)])
    with stack.session("kame", session=stack.session_config(max_tail_s=2.0, title="warm-up")) as runner:
        runner.run_sync(audio, _StopAtFirstOracleToken(runner))


class _StopAtFirstOracleToken:
    """A frame sink that ends its session at the first frame fed an oracle token (the LLM has answered)."""

    def __init__(self, runner: SessionDriver) -> None:
        self.runner = runner

    def on_frame(self, frame: FrameOut) -> None:
        if frame.record.oracle.token is not None:
            self.runner.stop()


def pool_gate(size: int) -> SessionGate:
    """The admission of a neural model's session pool (every door of a process shares one)."""
    return SessionGate(capacity=size, reason=f"all {size} session slots of the model are in use")
