"""Virtual-clock tests of every oracle-manager rule (official KAME semantics)."""
from __future__ import annotations

from kame_core.clock import FRAME_SECONDS, VirtualClock
from kame_core.oracle.config import Conversation, OracleConfig
from kame_core.oracle.manager import OracleManager, OracleStream
from kame_core.pipelines.tandem import TandemRunner
from kame_core.record.trace import EventKind, SessionTrace
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import DenseWordTokenizer, EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at


def run_kame(words_segments, llm, total=None, **cfg):
    fe = EchoFrontEnd()
    ends = [seg[-1].end for seg in words_segments]
    total = total or max(ends) + 1.0
    audio = speech_like([(seg[0].start, seg[-1].end) for seg in words_segments], total)
    oracle = OracleConfig(**{k: v for k, v in cfg.items() if k in OracleConfig.__dataclass_fields__})
    config = SessionConfig(oracle=oracle, **{k: v for k, v in cfg.items() if k in SessionConfig.__dataclass_fields__})
    trace = TandemRunner(fe, ScriptedSTT(words_segments), llm, config, VirtualClock()).run_sync(audio)
    return trace, fe


def starts(trace):
    return trace.events_of(EventKind.LLM_REQUEST_START)


# --- a manager driven by hand: poll decisions ----------------------------------------------------------
class Harness:
    """An OracleManager with a hand-driven conversation on a virtual clock."""

    def __init__(self, **cfg):
        self.conv = Conversation()
        self.tok = DenseWordTokenizer()
        self.stream = OracleStream(self.tok)
        self.trace = SessionTrace(mode="kame")
        self.clock = VirtualClock()
        self.llm = ScriptedLLM(lambda u: "ok " * 30, first_chunk_s=10.0)  # never answers within the test
        self.manager = OracleManager(OracleConfig(**cfg), self.llm, self.conv, self.stream, self.tok,
                                     self.clock, self.trace)

    def run(self, script):
        """script: list of (time, callable(conv)) applied before the poll at that time."""
        async def main():
            for t, action in script:
                await self.clock.sleep_until(t)
                if action:
                    action(self.conv)
                await self.manager.poll()
            await self.clock.sleep(0.01)
            await self.manager.shutdown()
        self.clock.run(main)
        return [(round(e.t, 3), e.data["reason"]) for e in starts(self.trace)]


def test_no_start_without_user_text():
    h = Harness()
    assert h.run([(0.5, None), (1.0, None)]) == []


def test_start_as_soon_as_user_text_is_pending():
    h = Harness()
    assert h.run([(0.5, lambda c: c.on_partial("hello"))]) == [(0.5, "pending user text")]


def test_restart_needs_two_new_user_words():
    h = Harness()
    got = h.run([
        (0.5, lambda c: c.on_partial("what")),
        (1.0, lambda c: c.on_partial("what is")),            # +1 word: no restart while running
        (1.5, lambda c: c.on_partial("what is the")),        # +2 since start: restart
        (2.0, lambda c: c.on_partial("what is the capital")),  # +1: no restart
    ])
    assert got == [(0.5, "pending user text"), (1.5, "user words +2")]
    cancels = [e.data["request"] for e in h.trace.events_of(EventKind.LLM_REQUEST_CANCEL) if e.t < 2.0]
    assert cancels == [1]


def test_final_transcript_restarts_even_without_new_words():
    h = Harness()
    got = h.run([(0.5, lambda c: c.on_partial("what is it")), (1.0, lambda c: c.on_final("what is it"))])
    assert got == [(0.5, "pending user text"), (1.0, "final")]


def test_assistant_speech_never_counts_as_user_words():
    h = Harness()
    def assistant_talks(c):
        for w in "well I think the answer is".split():
            c.on_assistant_piece(" " + w)
        c.commit_assistant()
    got = h.run([(0.5, lambda c: c.on_partial("hi")), (1.0, assistant_talks), (1.5, assistant_talks)])
    assert got == [(0.5, "pending user text")]
    assert h.conv.user_word_count() == 1


def test_at_most_five_starts_in_any_two_second_window() -> None:
    h = Harness(interval_s=0.1)
    script = []
    words: list[str] = []
    for k in range(1, 31):  # two new words every 0.1 s for 3 s: the rules would restart every poll
        words += [f"w{2 * k}", f"w{2 * k + 1}"]
        text = " ".join(words)
        script.append((round(k * 0.1, 3), lambda c, text=text: c.on_partial(text)))
    got = [t for t, _ in h.run(script)]
    assert len(got) > 5
    for t in got:
        in_window = [u for u in got if t - 2.0 < u <= t + 1e-9]
        assert len(in_window) <= 5, (t, in_window)
    assert h.trace.events_of(EventKind.NOTE), "rate-limited polls are recorded"


def test_llm_gets_committed_conversation_plus_pending_partial_as_chat_turns():
    h = Harness(prompt_layout="chat")
    def turn(c):
        c.on_final("tell me a joke")
        c.on_assistant_piece(" why not")
        c.commit_assistant()
        c.on_partial("about cats")
    h.run([(0.5, turn)])
    sent = h.llm.requests[0]
    assert [(m.role, m.content) for m in sent[1:]] == [
        ("user", "tell me a joke"), ("assistant", "why not"), ("user", "about cats")]
    assert sent[0].role == "system" and "30 words" in sent[0].content


def test_system_prompt_is_configurable():
    h = Harness(system_prompt="Answer in French.")
    h.run([(0.5, lambda c: c.on_partial("hello"))])
    assert h.llm.requests[0][0].content == "Answer in French."


# --- through the runner: reset then append, per-frame feeding ---------------------------------------------
def test_first_chunk_resets_then_chunks_append_one_token_per_frame():
    words = words_at("what is two plus two", 0.4)
    llm = ScriptedLLM(lambda u: "it is four", first_chunk_s=0.3, words_per_chunk=2)
    trace, fe = run_kame([words], llm)
    resets = trace.events_of(EventKind.ORACLE_RESET)
    assert resets
    tok = fe.tokenizer
    # every revision: start token at one frame, then its tokens one per frame, then padding
    for reset in resets:
        rev = reset.data["revision"]
        frames = [i for i, f in enumerate(trace.frames) if f.oracle.revision == rev]
        first = frames[0]
        assert trace.frames[first].oracle.is_start and trace.frames[first].oracle.token == tok.start_token_id
        fed_at = (first + 1) * FRAME_SECONDS  # frame i is processed at (i + 1) * 80 ms
        assert 0 <= fed_at - reset.t < FRAME_SECONDS + 1e-9  # fed at the first frame after the chunk
        assert frames == list(range(first, first + len(frames)))  # contiguous
        pieces = [trace.frames[i].oracle.piece.strip() for i in frames[1:]]
        appended = " ".join(e.data["text"] for e in trace.events_of(EventKind.ORACLE_APPEND)
                            if e.data["revision"] == rev).split()
        assert pieces == appended[: len(pieces)]
    last = max(i for i, f in enumerate(trace.frames) if f.oracle.revision is not None)
    assert all(f.oracle.is_padding for f in trace.frames[last + 1:])
    # what the front-end was fed is exactly what the trace records
    assert [t for t, _ in fe.steps] == [f.oracle.token for f in trace.frames]


def test_cancelled_stream_never_leaks_after_newer_reset():
    """An adversarial slow back-end that ignores cancellation keeps streaming late chunks."""
    words = words_at("please tell me what the weather will be like tomorrow in tokyo", 0.3, per_word=0.3)
    llm = ScriptedLLM(lambda u: f"{u.split()[-1].upper()} " * 40, first_chunk_s=0.2, per_chunk_s=0.15,
                      ignore_cancel=True, words_per_chunk=1)
    trace, _ = run_kame([words], llm)
    resets = trace.events_of(EventKind.ORACLE_RESET)
    assert len(resets) >= 3
    # each revision's frames carry only that revision's words (its answer repeats one marker word)
    appends = {}
    for e in trace.events_of(EventKind.ORACLE_APPEND):
        appends.setdefault(e.data["revision"], set()).update(e.data["text"].split())
    assert all(len(ws) == 1 for ws in appends.values()), appends
    for rev, ws in appends.items():
        marker = next(iter(ws))
        later = [f for f in trace.frames if f.oracle.revision is not None and f.oracle.revision > rev]
        assert all(f.oracle.piece.strip() != marker for f in later), f"revision {rev} leaked"
    # and once a newer stream started, an older request never appended again
    start_t = {e.data["request"]: e.t for e in starts(trace)}
    for e in trace.events_of(EventKind.ORACLE_APPEND):
        newer = [t for r, t in start_t.items() if r > e.data["request"]]
        assert all(e.t <= t for t in newer), (e, newer)
    assert any(e.data.get("late") for e in trace.events_of(EventKind.LLM_REQUEST_CANCEL))


def test_backend_error_is_logged_and_retried_at_next_poll():
    words = words_at("what is two plus two", 0.4)
    llm = ScriptedLLM(lambda u: "it is four and that is certain", fail_after=1, fail_times=1)
    trace, _ = run_kame([words], llm)
    errors = trace.events_of(EventKind.LLM_ERROR)
    assert len(errors) == 1 and "429" in errors[0].data["error"]
    later = [e for e in starts(trace) if e.t > errors[0].t]
    assert later and later[0].t - errors[0].t <= 0.5 + 1e-6
    assert trace.events_of(EventKind.LLM_REQUEST_FINISH)


def test_newest_stream_wins_in_spoken_text():
    words = words_at("what is the capital of france", 0.3)
    llm = ScriptedLLM(lambda u: "paris" if "france" in u else "hmm let me think about that one")
    trace, _ = run_kame([words], llm, total=6.0)
    assert trace.spoken_text().split()[-1] == "paris"
