"""Import a canonical-layout training dialogue as a scenario, so the app shows its four streams.

User audio = channel A, assistant audio = channel B, inner monologue = B's words at their frames, oracle
stream = the oracle records addressed to B (``channel == 1``) tokenized onto frames, each reset carrying its
hint level. The run's provenance says plainly that it is an imported training dialogue.
"""
from __future__ import annotations

from pathlib import Path

from ..analysis.metrics import annotate_onsets
from ..clock import frame_start
from ..record import events as ev
from ..record.trace import FrameRecord, OracleToken, Provenance, SessionTrace
from ..scenario import Scenario
from .oracle_records import OracleRecord
from .oracle_stream import NO_EVENT
from .training_dialogue import dialogue_frames, load_training_dialogue
from .transcript import TranscriptWord
from .word_tokenizer import DenseWordTokenizer

ASSISTANT, USER = "B", "A"
ASSISTANT_CHANNEL = 1


def _utterances(words: list[TranscriptWord], speaker: str, gap_s: float = 1.0) -> list[list[TranscriptWord]]:
    runs: list[list[TranscriptWord]] = []
    for w in words:
        if w.speaker != speaker:
            continue
        if runs and w.start - runs[-1][-1].end < gap_s:
            runs[-1].append(w)
        else:
            runs.append([w])
    return runs


def _oracle_source(records: list[OracleRecord]) -> str:
    """Who wrote the records: a simulator LLM, or (records with ``use_hint``) the random strategy."""
    if any(r.use_hint is not None for r in records):
        return ("oracle_raw records (random strategy, no LLM: responses sampled from other dialogues, the ground "
                "truth at each response's last update)")
    return "oracle_raw records (simulator LLM)"


def training_dialogue_scenario(root: str | Path, dialogue_id: str) -> Scenario:
    """Read ``root/{audio,text,oracle_raw}/<dialogue_id>.*`` and build a one-run scenario (run id ``training``)."""
    dialogue = load_training_dialogue(root, dialogue_id)
    records = [r for r in dialogue.records if r.channel == ASSISTANT_CHANNEL]
    dialogue = type(dialogue)(dialogue.dialogue_id, dialogue.user_audio, dialogue.assistant_audio,
                              dialogue.words, records)
    tokenizer = DenseWordTokenizer()
    frames = dialogue_frames(dialogue, tokenizer, assistant=ASSISTANT)
    trace = SessionTrace(
        mode="imported", title=f"Training dialogue {dialogue_id}",
        provenance={"front_end": Provenance("imported-training-dialogue", model_id=dialogue_id,
                                            label="speaker B of a KAME-layout training dialogue"),
                    "oracle": Provenance("imported-training-dialogue", label=_oracle_source(records))},
        config={"source": str(Path(root).name), "dialogue_id": dialogue_id, "user": USER, "assistant": ASSISTANT},
    )
    start_id = tokenizer.start_token_id
    for i in range(dialogue.n_frames):
        rev = int(frames.oracle.revision[i])
        token = int(frames.oracle.tokens[i])
        oracle = OracleToken() if rev == NO_EVENT else OracleToken(
            token=token, piece=frames.oracle_pieces[i], revision=rev + 1, is_start=token == start_id)
        text_id = int(frames.text_tokens[i])
        record = FrameRecord(text_piece=frames.text_pieces[i],
                             text_token=None if text_id == tokenizer.padding_token_id else text_id, oracle=oracle)
        sl = slice(i * 1920, (i + 1) * 1920)
        trace.append_frame(record, dialogue.user_audio[sl], dialogue.assistant_audio[sl])
    for utterance in _utterances(dialogue.words, USER):
        trace.record(utterance[0].start, ev.UserSpeechStart(audio_t=utterance[0].start))
        trace.record(utterance[-1].end, ev.UserSpeechEnd(audio_t=utterance[-1].end))
        trace.record(utterance[-1].end, ev.SttFinal(text=" ".join(w.word for w in utterance),
                                                     words=[[w.word, w.start, w.end] for w in utterance],
                                                     source="reference transcript"))
    for k, r in enumerate(records):
        trace.record(r.t, ev.OracleReset(request=None, revision=k + 1, text=r.selected))
        # the dataset gives each record's level (ORACLE_RULES.md): known as the revision starts
        trace.record(r.t, ev.HintLevel(revision=k + 1, hint_level=r.hint_level, spoken_ratio=r.current_spoken_ratio))
    trace.finish()
    annotate_onsets(trace)
    return Scenario(name=dialogue_id, title=trace.title, runs={"training": trace}, tags=["training-dialogue"],
                    description=f"Imported from the KAME dataset layout ({len(records)} oracle records for B); "
                                f"{frame_start(trace.n_frames):.1f} s.")
