"""A synthetic Full-Duplex-Bench v1-layout set spoken by Piper, to tune and measure an end-of-turn gate.

Five kinds of input, each an FDB sample folder (``input.wav`` at 16 kHz beside its annotation): complete
questions (``smooth_turn_taking``: the system should answer soon; about half with a short hesitation between two
words, as people make, where it must not take the turn), questions with a pause inside an unfinished
sentence (``pause_handling``: it must hold through the pause), lone backchannels (``backchannel``: it should
not take the turn), a question whose answer the user cuts into (``user_interruption``: it should answer the
words that cut in) and monologues of three sentences with pauses between them (``icc_backchannel``, the
benchmark's backchannel task: it should backchannel in the pauses, not take the turn; digit-named folders scored
against a synthetic reference written beside them). A hesitation or a pause is cut into one utterance at the TTS's
word timings, so the words before it sound unfinished, as a person's do. Items alternate between ``<out>/tuning``
and ``<out>/held_out``, each an FDB root; one seed reproduces the set. Synthetic speech, not the benchmark's data::

    python -m kame_core.eval fdb-synth --out DIR [--seed 0] [--limit N] [--overwrite]
"""
from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from ..audio_io import resample
from ..clock import SAMPLE_RATE
from ..files import write_bytes_atomic
from .fdb_backchannel import REFERENCE_FILE, TASK, WINDOW_S

#: FDB inputs are 16 kHz mono
OUT_RATE = 16_000
#: peak level of the written speech (Piper normalizes its output to a peak of 1.0)
LEVEL = 0.5
#: Piper's silent padding is cut where |x| (at Piper's level) stays below this
TRIM_THRESHOLD = 1e-3
#: ramps where a part was cut out of one utterance (seconds)
FADE_S = 0.01
#: speech starts/ends where |x| (at Piper's level) first/last exceeds this; the annotations are measured with it
SPEECH_THRESHOLD = 1e-2
LEAD_S = (0.3, 0.6)
PAUSE_S = (0.8, 1.6)
QUESTION_TAIL_S = 4.0
#: the share of complete questions spoken with a hesitation between two words, and its length (seconds)
HESITATION_SHARE = 0.5
HESITATION_S = (0.12, 0.32)
PAUSE_TAIL_S = 0.5
BACKCHANNEL_LEAD_S = 1.0
BACKCHANNEL_TAIL_S = 3.0
#: silence between a question and the words that cut into its answer (seconds: the answer is under way), and after
INTERRUPT_GAP_S = (2.0, 3.0)
INTERRUPT_TAIL_S = 4.0
#: a monologue's pauses between its sentences (seconds), and the silence after its last one (short: the sample is cut
#: there, as the benchmark's ICC clips are cut mid-conversation, so an answer to the end is not scored as a backchannel)
SENTENCE_PAUSE_S = (0.6, 1.1)
MONOLOGUE_TAIL_S = 0.2
HALVES = ("tuning", "held_out")
MANIFEST = "synth_set.json"
EXIT_BAD_INPUT = 2

QUESTIONS = (
    "What is the capital of France?",
    "How long does it take to boil an egg?",
    "Can you recommend a good book about history?",
    "What time does the sun set in winter?",
    "Why is the sky blue?",
    "How many legs does a spider have?",
    "Could you explain how a rainbow forms?",
    "What should I cook for dinner tonight?",
    "Is it going to rain tomorrow?",
    "Who wrote Romeo and Juliet?",
    "How do I reset my password?",
    "What's the best way to learn a new language?",
    "Can dogs eat chocolate?",
    "How far is the moon from the earth?",
    "What does a software engineer do all day?",
    "Do you know any good jokes?",
    "Where is the tallest mountain in the world?",
    "How can I sleep better at night?",
)

#: (first part, syntactically unfinished; the rest after the pause)
PAUSED_QUESTIONS = (
    ("What is the capital of", "France?"),
    ("Could you tell me how to", "bake bread?"),
    ("I was wondering whether you", "could help me with my homework?"),
    ("Can you explain why the", "ocean is salty?"),
    ("How many people live in", "Tokyo?"),
    ("I'd like to know what the", "weather will be like this weekend."),
    ("What's the best way to", "get to the airport?"),
    ("Do you think it's a good idea to", "buy a used car?"),
    ("Could you remind me when the", "meeting starts?"),
    ("I need some advice about", "planting tomatoes."),
    ("Who was the first person to", "walk on the moon?"),
    ("Tell me a little bit about the", "history of Rome."),
    ("Is there a way to", "make coffee without a machine?"),
    ("What happens if you", "leave milk out overnight?"),
    ("My friend asked me if", "you could recommend a movie."),
    ("Why do cats like to", "sleep in boxes?"),
)

BACKCHANNELS = ("mm-hmm", "yeah", "right", "okay", "I see", "uh-huh", "sure", "got it", "oh really", "yep")

#: (a complete question, what the user says into the answer to it)
INTERRUPTIONS = (
    ("What is the tallest mountain in Europe?", "Sorry, I meant in Africa."),
    ("How do I make a cup of tea?", "Wait, I only have green tea."),
    ("Who painted the Mona Lisa?", "Actually, where is it kept now?"),
    ("What is the capital of Australia?", "Hold on, what about New Zealand?"),
    ("How far is the moon from the earth?", "Sorry, in miles please."),
    ("Can you recommend a good book?", "Something short, please."),
    ("What time does the sun set today?", "No wait, I meant sunrise."),
    ("How many legs does a spider have?", "And what about an ant?"),
    ("What should I cook for dinner tonight?", "Something without meat, please."),
    ("How do rainbows form?", "Okay, but why are they curved?"),
)

#: a user telling something over several sentences, pausing between them, where a listener backchannels
MONOLOGUES = (
    ("So I started a new job last week.", "The office is right next to the river.",
     "Every morning I walk there along the water."),
    ("My sister came to visit over the weekend.", "We went hiking up the hill behind the town.",
     "It rained the whole way down."),
    ("I tried baking bread for the first time.", "The dough did not rise at all.",
     "So I ended up making flatbread instead."),
    ("Our neighbours got a new puppy.", "It barks every time the mail arrives.",
     "The kids love it though."),
    ("I finally finished reading that long novel.", "It took me almost three months.",
     "The ending was worth the wait."),
    ("Last night the power went out in our street.", "We lit some candles and played cards.",
     "It was actually a lot of fun."),
    ("I have been learning to play the guitar.", "My fingers hurt a lot at first.",
     "Now I can play a few simple songs."),
    ("We moved the furniture around in the living room.", "The sofa is by the window now.",
     "The room feels much bigger."),
    ("My train was late again this morning.", "I waited on the platform for half an hour.",
     "Then it skipped my station anyway."),
    ("I planted tomatoes in the garden this spring.", "The birds ate most of the first ones.",
     "So I put a net over them."),
)

#: kind -> (FDB task folder, annotation file (None: the task has none), annotation label, id prefix)
KINDS = {
    "question": ("smooth_turn_taking", "turn_taking.json", "[TURN-TAKING]", "q"),
    "paused": ("pause_handling", "pause.json", "[PAUSE]", "p"),
    "backchannel": ("backchannel", "backchannel.json", "[BACKCHANNEL]", "b"),
    "interruption": ("user_interruption", "interrupt.json", "[INTERRUPT]", "i"),
    # digit-named as the benchmark's backchannel script requires; scored against REFERENCE_FILE, not an annotation
    "monologue": (TASK, None, None, ""),
}

NOTE = ("Synthetic speech made with {tts} for tuning and measuring an end-of-turn gate, laid out as "
        "Full-Duplex-Bench v1 (<half>/<task>/<id>/input.wav + annotation); it is NOT the benchmark's data. "
        "smooth_turn_taking: complete questions (timestamp[0] = end of the user's speech); pause_handling: "
        "a pause inside an unfinished question (timestamp = [pause start, pause end]); backchannel: a lone "
        "backchannel word (timestamp = its [start, end]); user_interruption: a complete question, a silence in which "
        "the system answers, then the user cutting in (interrupt.json: the context, the interrupting words, "
        "timestamp = their [start, end]); icc_backchannel: a monologue of three sentences with pauses between them "
        "(digit-named folders, no annotation; its " + REFERENCE_FILE + " is a SYNTHETIC reference, not human "
        "listeners': uniform over the 0.2 s windows of each pause between sentences). Times are measured from the "
        "audio.")


@dataclass(frozen=True)
class SynthItem:
    """One written sample: ``<out>/<half>/<task>/<item_id>/input.wav`` and its annotation."""

    kind: str
    item_id: str
    half: str
    texts: tuple[str, ...]
    annotation: tuple[float, float]
    duration_s: float
    #: a monologue's pauses between sentences, [start, end] each (seconds; empty for the other kinds)
    pauses: tuple[tuple[float, float], ...] = ()

    @property
    def task(self) -> str:
        return KINDS[self.kind][0]

    @property
    def rel_folder(self) -> str:
        return f"{self.half}/{self.task}/{self.item_id}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.item_id, "half": self.half, "task": self.task,
                "folder": self.rel_folder, "texts": list(self.texts), "annotation": list(self.annotation),
                "duration_s": self.duration_s, **({"pauses": [list(p) for p in self.pauses]} if self.pauses else {})}


@dataclass(frozen=True)
class _Speech:
    """One trimmed utterance at 16 kHz and where its speech lies in it (sample indices, end exclusive)."""

    audio: np.ndarray
    start: int
    end: int


# -- checks ------------------------------------------------------------------------------------------------
def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, not {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _prepare_out(out: Path, overwrite: bool) -> None:
    """Refuse an ``out`` that already holds a set (unless ``overwrite``, which removes the old halves)."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a folder")
    halves = [out / h for h in HALVES if (out / h).exists() or (out / h).is_symlink()]
    if not overwrite:
        if (out / MANIFEST).exists():
            raise ValueError(f"--out {out}: already holds a synthetic set ({MANIFEST}); pass overwrite=True "
                             "(--overwrite) to replace it")
        if halves:
            raise ValueError(f"--out {out}: already holds {', '.join(h.name for h in halves)}/ but no {MANIFEST} "
                             "(an interrupted run?); pass overwrite=True (--overwrite) to replace it")
    if overwrite and (out / MANIFEST).is_file():
        (out / MANIFEST).unlink()  # a run that fails from here on leaves no manifest describing old items
    for half in halves:
        if half.is_symlink() or not half.is_dir():
            half.unlink()
        else:
            shutil.rmtree(half)
    out.mkdir(parents=True, exist_ok=True)


# -- audio ---------------------------------------------------------------------------------------------------
def _speak(tts: Any, texts: tuple[str, ...]) -> list[_Speech]:
    """``texts`` spoken by ``tts`` as one utterance and cut between them where the TTS's word timings end a part's
    last word, at 16 kHz, Piper's silent padding cut, scaled to :data:`LEVEL`. One utterance, so a part
    before a pause keeps the voice of an unfinished sentence (a fragment spoken alone ends like a sentence, which
    no one pausing mid-sentence does)."""
    synthesis = tts.synthesize(" ".join(texts))
    audio = resample(np.asarray(synthesis.audio, np.float32), SAMPLE_RATE, OUT_RATE)
    peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
    if peak <= SPEECH_THRESHOLD:
        raise ValueError(f"the TTS made no audible speech for {' '.join(texts)!r}")
    audio = audio * np.float32(LEVEL / peak)
    cuts, words = [], 0
    for text in texts[:-1]:
        words += len(text.split())
        if len(synthesis.words) <= words:
            raise ValueError(f"the TTS gave {len(synthesis.words)} word timings for {' '.join(texts)!r}: "
                             "cannot cut it between its parts")
        cuts.append(min(len(audio), int(round(synthesis.words[words - 1].end * OUT_RATE))))
    bounds = [0, *cuts, len(audio)]
    return [_trimmed(_faded(audio[a:b], head=a > 0, tail=b < len(audio)), " ".join(texts))
            for a, b in zip(bounds, bounds[1:])]


def _faded(audio: np.ndarray, head: bool, tail: bool) -> np.ndarray:
    """``audio`` with :data:`FADE_S` ramps where it was cut out of an utterance (no click at the cut)."""
    out = audio.copy()
    n = min(int(FADE_S * OUT_RATE), len(out) // 2)
    ramp = np.linspace(0.0, 1.0, n, dtype=np.float32)
    if head and n:
        out[:n] *= ramp
    if tail and n:
        out[-n:] *= ramp[::-1]
    return out


def _trimmed(audio: np.ndarray, text: str) -> _Speech:
    """``audio`` without the silence around it, and where its speech lies."""
    kept = np.flatnonzero(np.abs(audio) > TRIM_THRESHOLD * LEVEL)
    if not len(kept):
        raise ValueError(f"the TTS made a silent part of {text!r}")
    audio = audio[kept[0]:kept[-1] + 1]
    loud = np.flatnonzero(np.abs(audio) > SPEECH_THRESHOLD * LEVEL)
    if not len(loud):
        raise ValueError(f"the TTS made an inaudible part of {text!r}")
    return _Speech(audio.astype(np.float32), int(loud[0]), int(loud[-1]) + 1)


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(round(seconds * OUT_RATE)), np.float32)


def _seconds(n: int) -> float:
    return round(n / OUT_RATE, 6)


def _wav_bytes(audio: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.clip(audio, -1.0, 1.0), OUT_RATE, subtype="PCM_16", format="WAV")
    return buf.getvalue()


# -- items ---------------------------------------------------------------------------------------------------
def _question(tts: Any, texts: tuple[str, ...], rng: np.random.Generator) -> tuple[np.ndarray, tuple[float, float]]:
    """One complete question, or (two texts) the same words with a hesitation between its two parts."""
    lead = _silence(rng.uniform(*LEAD_S))
    parts = _speak(tts, texts)
    spoken = [parts[0].audio]
    for part in parts[1:]:
        spoken += [_silence(rng.uniform(*HESITATION_S)), part.audio]
    speech = np.concatenate(spoken)
    audio = np.concatenate([lead, speech, _silence(QUESTION_TAIL_S)])
    end = len(lead) + len(speech) - len(parts[-1].audio) + parts[-1].end
    return audio, (_seconds(end), _seconds(len(audio)))


def _hesitated(text: str, rng: np.random.Generator) -> tuple[str, ...]:
    """``text`` whole, or (:data:`HESITATION_SHARE` of the time) split between two words, two or more each side."""
    words = text.split()
    if rng.random() >= HESITATION_SHARE or len(words) < 4:
        return (text,)
    at = int(rng.integers(2, len(words) - 1))
    return " ".join(words[:at]), " ".join(words[at:])


def _paused(tts: Any, first: str, rest: str, rng: np.random.Generator) -> tuple[np.ndarray, tuple[float, float]]:
    lead = _silence(rng.uniform(*LEAD_S))
    pause = _silence(rng.uniform(*PAUSE_S))
    one, two = _speak(tts, (first, rest))
    audio = np.concatenate([lead, one.audio, pause, two.audio, _silence(PAUSE_TAIL_S)])
    two_at = len(lead) + len(one.audio) + len(pause)
    return audio, (_seconds(len(lead) + one.end), _seconds(two_at + two.start))


def _backchannel(tts: Any, text: str) -> tuple[np.ndarray, tuple[float, float]]:
    lead = _silence(BACKCHANNEL_LEAD_S)
    speech, = _speak(tts, (text,))
    audio = np.concatenate([lead, speech.audio, _silence(BACKCHANNEL_TAIL_S)])
    return audio, (_seconds(len(lead) + speech.start), _seconds(len(lead) + speech.end))


def _interrupted(tts: Any, context: str, interrupt: str, rng: np.random.Generator
                 ) -> tuple[np.ndarray, tuple[float, float]]:
    """The question, :data:`INTERRUPT_GAP_S` of silence (the system's answer under way), the interrupting words,
    then time for the system to answer them; the annotation is the interrupting words' [start, end]."""
    lead = _silence(rng.uniform(*LEAD_S))
    gap = _silence(rng.uniform(*INTERRUPT_GAP_S))
    asked, cut_in = _speak(tts, (context, interrupt))
    audio = np.concatenate([lead, asked.audio, gap, cut_in.audio, _silence(INTERRUPT_TAIL_S)])
    at = len(lead) + len(asked.audio) + len(gap)
    return audio, (_seconds(at + cut_in.start), _seconds(at + cut_in.end))


def _monologue(tts: Any, sentences: tuple[str, ...], rng: np.random.Generator
               ) -> tuple[np.ndarray, tuple[float, float], tuple[tuple[float, float], ...]]:
    """The sentences as one utterance with :data:`SENTENCE_PAUSE_S` between them, then :data:`MONOLOGUE_TAIL_S`; the
    speech's [start, end] and each pause's [one sentence's last sound, the next one's first] (seconds)."""
    lead = _silence(rng.uniform(*LEAD_S))
    chunks, spans, at = [lead], [], len(lead)
    for i, part in enumerate(_speak(tts, sentences)):
        if i:
            gap = _silence(rng.uniform(*SENTENCE_PAUSE_S))
            chunks.append(gap)
            at += len(gap)
        chunks.append(part.audio)
        spans.append((at + part.start, at + part.end))
        at += len(part.audio)
    chunks.append(_silence(MONOLOGUE_TAIL_S))
    pauses = tuple((_seconds(one[1]), _seconds(two[0])) for one, two in zip(spans, spans[1:]))
    return np.concatenate(chunks), (_seconds(spans[0][0]), _seconds(spans[-1][1])), pauses


def reference_distribution(duration_s: float, pauses: tuple[tuple[float, float], ...]) -> list[float]:
    """A SYNTHETIC backchannel reference for one monologue, in the benchmark's form (a distribution over
    :data:`WINDOW_S` windows of the sample): uniform over the windows each pause between sentences
    touches -- where a listener may backchannel; not measured on people."""
    weights = np.zeros(int(duration_s / WINDOW_S) + 1)
    for start, end in pauses:
        weights[int(start / WINDOW_S):int(end / WINDOW_S) + 1] += 1.0
    if not weights.sum():
        raise ValueError("a monologue without a pause between sentences has no reference")
    return [round(float(w), 6) for w in weights / weights.sum()]


def _texts(kind: str, limit: int | None) -> list[tuple[str, ...]]:
    texts: list[tuple[str, ...]]
    if kind == "question":
        texts = [(q,) for q in QUESTIONS]
    elif kind == "paused":
        texts = list(PAUSED_QUESTIONS)
    elif kind == "interruption":
        texts = list(INTERRUPTIONS)
    elif kind == "monologue":
        texts = list(MONOLOGUES)
    else:
        texts = [(b,) for b in BACKCHANNELS]
    return texts[:limit] if limit is not None else texts


def _make(kind: str, tts: Any, texts: tuple[str, ...], rng: np.random.Generator
          ) -> tuple[np.ndarray, tuple[float, float]]:
    if kind == "question":
        return _question(tts, texts, rng)
    if kind == "paused":
        return _paused(tts, texts[0], texts[1], rng)
    if kind == "interruption":
        return _interrupted(tts, texts[0], texts[1], rng)
    return _backchannel(tts, texts[0])


def _write_item(out: Path, item: SynthItem, audio: np.ndarray) -> None:
    _, annotation_file, label, _ = KINDS[item.kind]
    folder = out / item.rel_folder
    write_bytes_atomic(folder / "input.wav", _wav_bytes(audio))
    if annotation_file is None:  # a monologue: its reference is the task's file (:func:`_write_references`)
        return
    if item.kind == "interruption":  # the benchmark's interrupt.json: what was asked, what cut in, and when
        doc: list[dict[str, Any]] = [{"context": item.texts[0], "interrupt": item.texts[1],
                                      "timestamp": list(item.annotation)}]
    else:
        doc = [{"text": label, "timestamp": list(item.annotation)}]
    write_bytes_atomic(folder / annotation_file, json.dumps(doc).encode("utf-8"))


def _write_references(out: Path, items: list[SynthItem]) -> None:
    """Each half's ``icc_backchannel/`` :data:`REFERENCE_FILE`: the synthetic reference of each monologue by its id,
    and a note saying what it is (a key the benchmark's script never reads)."""
    for half in HALVES:
        monologues = [item for item in items if item.kind == "monologue" and item.half == half]
        if not monologues:
            continue
        doc: dict[str, Any] = {"_note": "SYNTHETIC reference made by kame_core.eval fdb-synth, not human listeners' "
                                        "backchannels: uniform over the 0.2 s windows of each pause between the "
                                        "user's sentences"}
        doc.update({item.item_id: reference_distribution(item.duration_s, item.pauses) for item in monologues})
        write_bytes_atomic(out / half / KINDS["monologue"][0] / REFERENCE_FILE, json.dumps(doc).encode("utf-8"))


def _tts_label(tts: Any) -> str:
    prov = getattr(tts, "provenance", None)
    if prov is None:
        return type(tts).__name__
    parts = (getattr(prov, "model_id", ""), getattr(prov, "version", ""), getattr(prov, "label", ""))
    return " · ".join(str(p) for p in parts if p) or type(tts).__name__


def synth_set(out: Path, tts: Any, *, seed: int = 0, limit: int | None = None,
              overwrite: bool = False) -> list[SynthItem]:
    """Write the set under ``out`` (``tuning/`` and ``held_out/``, each an FDB root) and ``out/synth_set.json``.

    ``limit`` caps the items of each kind; ``seed`` fixes lead silences and pause lengths. An ``out`` that holds
    a set already is refused unless ``overwrite``. Raises :class:`ValueError` on bad arguments.
    """
    seed = _check_int("seed", seed, 0)
    limit = None if limit is None else _check_int("limit", limit, 1)
    out = Path(out)
    _prepare_out(out, overwrite)
    rng = np.random.default_rng(seed)
    items = []
    for kind, (_, _, _, prefix) in KINDS.items():
        for i, texts in enumerate(_texts(kind, limit)):
            pauses: tuple[tuple[float, float], ...] = ()
            if kind == "question":
                texts = _hesitated(texts[0], rng)
            if kind == "monologue":
                audio, annotation, pauses = _monologue(tts, texts, rng)
            else:
                audio, annotation = _make(kind, tts, texts, rng)
            item = SynthItem(kind, f"{prefix}{i:02d}", HALVES[i % 2], texts, annotation, _seconds(len(audio)),
                             pauses)
            _write_item(out, item, audio)
            items.append(item)
    _write_references(out, items)
    label = _tts_label(tts)
    manifest = {"note": NOTE.format(tts=label), "seed": seed, "limit": limit, "tts": label,
                "sample_rate": OUT_RATE, "items": [item.to_json() for item in items]}
    write_bytes_atomic(out / MANIFEST, json.dumps(manifest, indent=1).encode("utf-8"))
    return items


# -- command line ----------------------------------------------------------------------------------------------
def add_parser(sub: Any) -> None:
    """The ``fdb-synth`` subcommand's options."""
    p = sub.add_parser("fdb-synth", help="write a synthetic Full-Duplex-Bench-layout set (Piper speech) with "
                                         "tuning/ and held_out/ halves")
    p.add_argument("--out", type=Path, required=True, help="folder to write: tuning/, held_out/, synth_set.json")
    p.add_argument("--seed", type=int, default=0, help="fixes lead silences and pause lengths")
    p.add_argument("--limit", type=int, default=None, help="at most this many items of each kind")
    p.add_argument("--overwrite", action="store_true", help="replace a set already in --out")
    p.add_argument("--tts", default="piper", choices=("piper", "espeak", "auto"), help="who speaks")


def run(args: argparse.Namespace) -> int:
    """Write the set for ``args``; 0 on success, 2 (with a message on stderr) on bad input."""
    from ..tts import make_tts

    try:
        _check_int("--seed", args.seed, 0)
        if args.limit is not None:
            _check_int("--limit", args.limit, 1)
        items = synth_set(args.out, make_tts(args.tts), seed=args.seed, limit=args.limit,
                          overwrite=args.overwrite)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # a full or read-only disk: said in one line (no manifest is written)
        print(f"error: --out {args.out}: cannot write the set ({exc.strerror or exc})", file=sys.stderr)
        return EXIT_BAD_INPUT
    counts = {h: sum(item.half == h for item in items) for h in HALVES}
    print(f"wrote {len(items)} synthetic items to {args.out} ({counts['tuning']} tuning, "
          f"{counts['held_out']} held out); {args.out / MANIFEST} describes them")
    return 0
