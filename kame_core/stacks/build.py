"""How stacks are built: the one place every door (the server, the app, the evaluation) composes its components.

* :func:`cpu_stack` -- the offline default on a laptop CPU: streaming faster-whisper (one batched worker per
  process), the CPU stand-in front-end (its opener guesses and Moshi-mode answers from SmolLM2-135M), an oracle LLM
  from any :func:`kame_core.llm.make_llm` spec, Piper TTS, the SmolLM2 end-of-turn detector;
* :func:`with_neural` -- KAME and Moshi mode on the neural models' session pools instead of the stand-in;
  :func:`load_neural` loads them from a :class:`~kame_core.neural.choice.FrontEndChoice` (or says why not);
* :func:`build_stack` -- both from :class:`~kame_core.settings.StackSettings`: what the server, the app and the
  eval ask for;
* :func:`stand_in_front_end` -- the stand-in's factory alone (the app's forced-delay re-runs).
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..neural.choice import FrontEndChoice, NeuralModels
from ..paths import ModelFiles
from ..protocols import TTS, CheckpointUnavailable, FrontEnd, StreamingLLM, StreamingSTT
from ..settings import StackSettings
from .stack import Stack

if TYPE_CHECKING:
    from ..llm.smollm_process import SmolLMProcess
    from ..stt.shared import SharedWhisper

#: what the stand-in's small model is asked for (kept short: it is spoken at once)
GUESS_SYSTEM = "Answer in one short spoken sentence of at most 15 words. No lists, no markdown."


def with_neural(stack: Stack, models: NeuralModels) -> Stack:
    """``stack`` with its KAME and Moshi-mode front-ends taken from ``models``' session pools; a shared STT
    worker moves to CUDA with a front-end on CUDA."""
    components = dict(stack.components, front_end=models.describe("kame"))
    components["front_end_moshi_mode"] = models.describe("moshi")
    stack = dataclasses.replace(stack, neural=models, components=components)
    worker = stack.stt_worker
    if worker is not None and models.device == "cuda" and worker.device != "cuda":
        try:
            stack = with_shared_stt(stack, type(worker).load(worker.model_dir, device="cuda",
                                                             niceness=worker.niceness))
        except (RuntimeError, OSError, ValueError) as exc:  # CTranslate2 without CUDA: the STT stays on the CPU
            logging.getLogger(__name__).warning("shared Whisper stays on the CPU: no CUDA for it (%s)", exc)
    return stack


def with_shared_stt(stack: Stack, worker: SharedWhisper) -> Stack:
    """``stack`` whose sessions decode through ``worker``."""
    from ..stt import WhisperStreamingSTT

    def stt() -> StreamingSTT:
        return WhisperStreamingSTT(shared=worker)

    components = dict(stack.components, stt=_describe(stt().provenance))
    return dataclasses.replace(stack, make_stt=stt, stt_worker=worker, components=components)




def cpu_stack(llm: str | StreamingLLM = "offline", tts: str | TTS = "auto", *, whisper_model: str | None = None,
              small_model_openers: bool = True, words_per_s: float = 3.0, files: ModelFiles | None = None,
              shared_stt: bool = True, stt_device: str = "cpu", realtime: bool = False) -> Stack:
    """The offline CPU stack: faster-whisper STT, stand-in front-end, ``llm`` oracle, Piper (or espeak-ng).

    ``realtime``: for sessions on the real-time clock, work that may lag gives way to the 80 ms frames: SmolLM2
    (an ``offline`` oracle, the stand-in's openers and answers) generates in one worker process
    (:mod:`kame_core.llm.smollm_process`, started when the stack is warmed or first asked: in a thread its Python
    holds the GIL the frames need), and the shared Whisper decodes with half the cores' threads, nicer than the
    frames (:mod:`kame_core.priority`).

    ``shared_stt``: every session's STT decodes through one batched Whisper worker on ``stt_device``
    (:class:`kame_core.stt.SharedWhisper`); else each session decodes alone on the CPU.

    ``small_model_openers``: the stand-in may start with a SmolLM2 guess before the first oracle (as the
    trained front-end starts before its best oracle); else with a content-light opener only. ``files``: where
    the local models come from when ``whisper_model`` is not given (``KAME_WHISPER_MODEL``, the cache root,
    ``HF_HUB_OFFLINE``; default: the built-in defaults).
    """
    from ..llm import make_llm
    from ..llm.smollm_process import SmolLMProcess
    from ..priority import STT_NICENESS, stt_threads_beside_frames
    from ..stt import SharedWhisper, WhisperStreamingSTT
    from ..tts import make_tts
    from ..turns.end_of_turn import SmolLMEndOfTurn
    from ..turns.smart_turn import SmartTurn

    process = SmolLMProcess(files.cache_root if files else None) if realtime else None
    oracle_llm = make_llm(llm, files=files, smollm_process=process) if isinstance(llm, str) else llm
    speech = make_tts(tts) if isinstance(tts, str) else tts
    front_end = stand_in_front_end(speech, files=files, openers=small_model_openers, words_per_s=words_per_s,
                                   process=process)

    worker = (SharedWhisper.load(whisper_model, files=files, device=stt_device,
                                 niceness=STT_NICENESS if realtime else 0,
                                 cpu_threads=stt_threads_beside_frames() if realtime else None) if shared_stt else None)

    def stt() -> StreamingSTT:
        return WhisperStreamingSTT(whisper_model, files=files, shared=worker)

    probe = stt()  # the Whisper model is loaded by now (here, or by the shared worker): a missing one fails here
    components = {
        "stt": _describe(probe.provenance),
        "front_end": ("CPU stand-in front-end — imitates KAME, NOT the trained model; "
                      f"openers / Moshi-mode answers by {front_end.small_model}"),
        "oracle_llm": _describe(getattr(oracle_llm, "provenance", None)) or type(oracle_llm).__name__,
        "tts": _describe(speech.provenance),
    }
    stack = Stack(make_stt=stt, make_front_end=front_end.make, llm=oracle_llm, tts=speech, components=components,
                  end_of_turn=SmolLMEndOfTurn(cache_root=files.cache_root if files else None),
                  end_of_turn_audio=SmartTurn(), llm_worker=process)
    return stack if worker is None else with_shared_stt(stack, worker)


def _describe(provenance: object) -> str:
    if provenance is None:
        return ""
    parts = [getattr(provenance, "model_id", ""), getattr(provenance, "version", ""),
             getattr(provenance, "label", "")]
    return " · ".join(p for p in parts if p)


@dataclass(frozen=True)
class StandIn:
    """The CPU stand-in front-end: its factory (a fresh one per session) and the small model its openers and
    Moshi-mode answers come from (None: content-free openers, no answers)."""

    make: Callable[[], FrontEnd]
    small_model: str | None


def stand_in_front_end(speech: TTS, *, files: ModelFiles | None = None, openers: bool = True,
                       answers: bool = True, words_per_s: float = 3.0,
                       process: SmolLMProcess | None = None) -> StandIn:
    """The stand-in speaking with ``speech``; SmolLM2-135M (from ``files``; generating in ``process`` when given)
    gives its openers when ``openers`` and its Moshi-mode answers when ``answers``."""
    from ..frontends import StandInFrontEnd
    from ..llm.local_smollm import LocalSmolLM

    if not (openers or answers):
        return StandIn(make=lambda: StandInFrontEnd(speech, words_per_s=words_per_s), small_model=None)
    small = LocalSmolLM(max_new_tokens=40, cache_root=files.cache_root if files else None, process=process)

    def small_answer(transcript: str) -> str:
        return small.complete(transcript, system=GUESS_SYSTEM)

    def make() -> FrontEnd:
        return StandInFrontEnd(speech, opener_llm=small_answer if openers else None,
                               answer_fn=small_answer if answers else None, words_per_s=words_per_s,
                               model_provenance=small.provenance)

    return StandIn(make=make, small_model=small.provenance.model_id)


#: the neural models a choice loaded, or None and why not
NeuralLoad = tuple[NeuralModels | None, str]


def load_neural(choice: FrontEndChoice, *, realtime: bool = False) -> NeuralLoad:
    """The neural models of ``choice`` (one session pool per model), or None and why not, in words (no weights
    named, or they do not load)."""
    if not choice.neural:
        return None, "KAME_WEIGHTS is not set (a local checkpoint folder or a Hugging Face repo id)"
    try:
        return choice.load(realtime=realtime), ""
    except (CheckpointUnavailable, ValueError) as err:
        return None, f"weights unavailable: {str(err).splitlines()[0]}"


def build_stack(settings: StackSettings, *, tts: str | TTS = "auto", whisper_model: str | None = None,
                realtime: bool = False, cpu_only: bool = False) -> Stack:
    """The stack ``settings`` describe: the CPU stack with ``settings.llm`` as the oracle, its sessions on
    ``settings.floor``; KAME and Moshi mode on the neural session pools when ``settings.front_end`` names weights
    (loaded here; a load that fails raises) and not ``cpu_only``. ``realtime``: the sessions run on the
    real-time clock (SmolLM2 in a worker process, see :func:`cpu_stack`; one torch thread on a CPU). With a
    neural front-end the stand-in's SmolLM2 openers are not loaded."""
    neural = not cpu_only and settings.front_end.neural
    stack = cpu_stack(llm=settings.llm, tts=tts, whisper_model=whisper_model, files=settings.files,
                      small_model_openers=settings.small_model and not neural, realtime=realtime)
    stack = dataclasses.replace(stack, floor=settings.floor)
    if neural:
        stack = with_neural(stack, settings.front_end.load(realtime=realtime))
    return stack
