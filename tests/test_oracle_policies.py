"""The official prompt layout and the emission-based adoption policy, beside chat turns and the restart
policy, on the virtual clock."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from kame_core.analysis.trace_query import llm_requests, oracle_revisions
from kame_core.clock import Clock, VirtualClock
from kame_core.oracle.config import DEFAULT_SYSTEM_PROMPT, OFFICIAL_SYSTEM_PROMPT, Conversation, OracleConfig
from kame_core.oracle.manager import OracleManager, OracleStream
from kame_core.oracle.policies import EmissionPolicy
from kame_core.pipelines.tandem import TandemRunner
from kame_core.protocols import ChatMessage
from kame_core.record.schema import check_trace_config
from kame_core.record.trace import EventKind, SessionTrace
from kame_core.session.config import SessionConfig

from .doubles import DOUBLE, DenseWordTokenizer, EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at


def conversation() -> Conversation:
    c = Conversation()
    c.on_final("tell me a joke")
    c.on_assistant_piece(" why not")
    c.commit_assistant()
    c.on_final("a short one")
    c.on_partial("about cats")
    return c


def test_official_layout_is_one_user_message_of_lines_and_the_default() -> None:
    config = OracleConfig()
    assert config.prompt_layout == "official" and config.policy == "restart"
    assert config.system_prompt == OFFICIAL_SYSTEM_PROMPT
    sent = config.messages(conversation())
    assert [m.role for m in sent] == ["system", "user"]
    assert sent[1].content == "user: tell me a joke\nmoshi: why not\nuser: a short one\nuser: about cats"
    cut = OracleConfig(max_prompt_chars=20).messages(conversation())[1].content
    assert cut == "e one\nuser: about cats"[-20:] and len(cut) == 20


def test_chat_layout_keeps_chat_turns() -> None:
    config = OracleConfig(prompt_layout="chat")
    assert config.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert [(m.role, m.content) for m in config.messages(conversation())[1:]] == [
        ("user", "tell me a joke"), ("assistant", "why not"), ("user", "a short one about cats")]


def test_bad_options_are_refused_and_old_traces_read_as_what_they_used() -> None:
    with pytest.raises(ValueError, match="prompt layout"):
        OracleConfig(prompt_layout="xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="oracle policy"):
        OracleConfig(policy="greedy")  # type: ignore[arg-type]
    old = OracleConfig.from_json({"interval_s": 0.5, "system_prompt": "x"})
    assert (old.prompt_layout, old.policy, old.system_prompt) == ("chat", "restart", "x")
    assert OracleConfig.from_json({}).prompt_layout == "official"
    again = OracleConfig.from_json(OracleConfig(policy="emission").to_json())
    assert again == OracleConfig(policy="emission")


def test_each_policy_owns_its_options() -> None:
    # the chosen policy's options, every one recorded (defaults filled), none of another policy's
    assert OracleConfig().to_json()["options"] == {"restart_word_delta": 2, "max_starts_per_window": 5,
                                                   "rate_window_s": 2.0}
    assert OracleConfig(policy="emission").options == {"max_concurrent_streams": 7}
    assert OracleConfig(policy="final_only").options == {}
    with pytest.raises(ValueError, match=r"oracle policy 'restart' has no option 'max_concurrent_streams' "
                                         r"\(its options: max_starts_per_window, rate_window_s, restart_word_delta\)"):
        OracleConfig(options={"max_concurrent_streams": 3})
    with pytest.raises(ValueError, match="emission policy: max_concurrent_streams must be at least 1"):
        OracleConfig(policy="emission", options={"max_concurrent_streams": 0})
    with pytest.raises(ValueError, match="restart_word_delta"):
        OracleConfig(options={"restart_word_delta": 0})
    # a trace from before policies owned their options: every policy's beside the others; the chosen one's kept
    old = {"interval_s": 0.5, "restart_word_delta": 3, "max_starts_per_window": 5, "rate_window_s": 2.0,
           "system_prompt": "x", "prompt_layout": "official", "policy": "emission", "max_concurrent_streams": 4,
           "max_prompt_chars": 6000}
    assert OracleConfig.from_json(old).options == {"max_concurrent_streams": 4}
    assert OracleConfig.from_json({**old, "policy": "restart"}).options["restart_word_delta"] == 3
    # a config read from a file: wrong types and non-finite numbers are refused by name, never a TypeError
    hostile: list[tuple[dict[str, Any], str]] = [({"options": "abc"}, "options must be an object"),
                        ({"options": {"restart_word_delta": "2"}}, "restart_word_delta must be a whole number"),
                        ({"options": {"restart_word_delta": True}}, "restart_word_delta must be a whole number"),
                        ({"options": {"max_starts_per_window": 2.5}}, "max_starts_per_window must be a whole"),
                        ({"options": {"rate_window_s": float("nan")}}, "rate_window_s must be a finite number"),
                        ({"interval_s": "x"}, "interval_s must be a number of seconds"),
                        ({"interval_s": float("inf")}, "interval_s must be a number of seconds"),
                        ({"max_prompt_chars": 1.5}, "max_prompt_chars must be a whole number"),
                        ({"policy": ["restart"]}, "unknown oracle policy")]
    for bad, needle in hostile:
        with pytest.raises(ValueError, match=needle):
            OracleConfig.from_json(bad)


@dataclass
class LatencyLLM:
    """Answers request k (1-based) after ``first[k]`` seconds with ``text(k)``, one word per chunk."""

    first: dict[int, float]
    text: Callable[[int], str] = lambda k: f"answer{k} " * 4
    per_chunk_s: float = 0.1
    provenance = DOUBLE
    requests: list[list[ChatMessage]] = field(default_factory=list)

    async def stream(self, messages: Sequence[ChatMessage], clock: Clock) -> AsyncIterator[str]:
        self.requests.append(list(messages))
        k = len(self.requests)
        for i, word in enumerate(self.text(k).split()):
            await clock.sleep(self.first.get(k, 0.3) if i == 0 else self.per_chunk_s)
            yield word + " "


class Harness:
    def __init__(self, llm: LatencyLLM, **cfg: object) -> None:
        self.conv = Conversation()
        self.trace = SessionTrace(mode="kame")
        self.clock = VirtualClock()
        self.config = OracleConfig(policy="emission", **cfg)  # type: ignore[arg-type]
        self.manager = OracleManager(self.config, llm, self.conv, OracleStream(DenseWordTokenizer()),
                                     DenseWordTokenizer(), self.clock, self.trace)

    def run(self, script: list[tuple[float, Callable[[Conversation], None] | None]], until: float) -> SessionTrace:
        async def main() -> None:
            for t, action in script:
                await self.clock.sleep_until(t)
                if action:
                    action(self.conv)
                await self.manager.poll()
            await self.clock.sleep_until(until)
            await self.manager.shutdown()
        self.clock.run(main)
        return self.trace


def _partial(text: str) -> Callable[[Conversation], None]:
    return lambda c: c.on_partial(text)


def partials(*texts: str, every: float = 0.5) -> list[tuple[float, Callable[[Conversation], None] | None]]:
    return [(round(every * (k + 1), 3), _partial(t)) for k, t in enumerate(texts)]


def test_streams_run_at_once_and_the_first_to_emit_is_adopted() -> None:
    # started at 0.5 / 1.0 / 1.5 s; request 1 is slow (emits at 2.5 s), 2 emits at 1.8 s, 3 at 2.4 s
    llm = LatencyLLM(first={1: 2.0, 2: 0.8, 3: 0.9}, text=lambda k: f"answer{k} " * 8)
    h = Harness(llm)
    assert isinstance(h.manager.policy, EmissionPolicy)
    trace = h.run(partials("what", "what is", "what is the"), until=4.0)
    starts = trace.events_of(EventKind.LLM_REQUEST_START)
    assert [round(e.t, 3) for e in starts] == [0.5, 1.0, 1.5] and all(e.data["policy"] == "emission" for e in starts)
    assert [(r.revision, r.request, round(r.reset_t, 3)) for r in oracle_revisions(trace)] == [(1, 2, 1.8), (2, 3, 2.4)]
    by = {r.request: r for r in llm_requests(trace)}
    assert by[1].outcome == "cancelled" and by[1].end_t == pytest.approx(1.8)  # older: cancelled on 2's adoption
    # request 3 was running, not yet emitting, when 2 was adopted: kept as a warm standby, adopted at 2.4 s
    assert by[2].outcome == "cancelled" and by[2].end_t == pytest.approx(2.4) and by[3].outcome == "finished"
    cancel_reasons = {e.data["request"]: e.data["reason"] for e in trace.events_of(EventKind.LLM_REQUEST_CANCEL)}
    assert cancel_reasons == {1: "request 2 was adopted", 2: "request 3 was adopted"}
    appended = [e.data["request"] for e in trace.events_of(EventKind.ORACLE_APPEND)]
    assert appended == sorted(appended) and set(appended) == {2, 3}  # never a chunk of an older stream


def test_an_unchanged_transcript_starts_nothing_a_final_forces_a_start() -> None:
    h = Harness(LatencyLLM(first={}))
    script = partials("hello there", "hello there", "hello there")
    script.append((2.0, lambda c: c.on_final("hello there")))
    trace = h.run(script, until=4.0)
    assert [(round(e.t, 3), e.data["reason"]) for e in trace.events_of(EventKind.LLM_REQUEST_START)] == [
        (0.5, "cadence: the user's transcript changed"), (2.0, "final")]


def test_no_start_while_the_assistant_spoke_last() -> None:
    h = Harness(LatencyLLM(first={}))

    def more_speech_then_the_user(c: Conversation) -> None:
        c.on_assistant_piece(" there")
        c.pending_user = "hi you"

    trace = h.run([(0.5, lambda c: c.on_partial("hi")), (1.0, lambda c: c.on_assistant_piece(" hello")),
                   (1.5, more_speech_then_the_user)], until=3.0)
    assert [round(e.t, 3) for e in trace.events_of(EventKind.LLM_REQUEST_START)] == [0.5]


def test_over_budget_the_adopted_and_newest_waiting_streams_are_kept() -> None:
    # 1 emits at once and streams on for seconds; the others never emit within the test
    llm = LatencyLLM(first={1: 0.2, **{k: 10.0 for k in range(2, 9)}}, text=lambda k: f"long{k} " * 40)
    h = Harness(llm, options={"max_concurrent_streams": 3})
    trace = h.run(partials(*(" ".join(["w"] * n) for n in range(1, 7))), until=3.5)
    reasons = {e.data["request"]: e.data.get("reason") for e in trace.events_of(EventKind.LLM_REQUEST_CANCEL)
               if e.t < 3.5 - 1e-9}
    # starts 1..6; with 3 allowed: adopted 1 kept, then the oldest waiting ones (2, 3, 4) make room in turn
    assert reasons == {2: "over the concurrency budget", 3: "over the concurrency budget",
                       4: "over the concurrency budget"}
    assert {r.request for r in oracle_revisions(trace)} == {1} and 1 not in reasons


def test_both_policies_and_layouts_run_through_the_runner_and_are_recorded() -> None:
    words = words_at("what is the capital of france", 0.3)
    audio = speech_like([(words[0].start, words[-1].end)], words[-1].end + 2.0)
    spoken = {}
    for policy in ("restart", "emission"):
        for layout in ("official", "chat"):
            llm = ScriptedLLM(lambda u: "paris" if "france" in u else "hmm let me think about that one")
            config = SessionConfig(oracle=OracleConfig(policy=policy, prompt_layout=layout))  # type: ignore[arg-type]
            trace = TandemRunner(EchoFrontEnd(), ScriptedSTT([words]), llm, config, VirtualClock()).run_sync(audio)
            check_trace_config(trace.config, "config")
            assert trace.config["oracle"]["policy"] == policy and trace.config["oracle"]["prompt_layout"] == layout
            assert SessionConfig.from_trace(trace).oracle == config.oracle
            first = trace.events_of(EventKind.LLM_REQUEST_START)[0].data["messages"]
            assert (len(first) == 1 and first[0]["content"].startswith("user: ")) == (layout == "official")
            spoken[(policy, layout)] = trace.spoken_text().split()[-1]
            assert all(r.hint_level is not None for r in oracle_revisions(trace))
    assert set(spoken.values()) == {"paris"}, spoken


def test_run_loop_polls_on_the_cadence_and_shutdown_cancels_everything() -> None:
    h = Harness(LatencyLLM(first={1: 5.0, 2: 5.0}))

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.ensure_future(h.manager.run(stop))
        await h.clock.sleep_until(0.3)
        h.conv.on_partial("hello")
        await h.clock.sleep_until(0.8)
        h.conv.on_partial("hello you")
        await h.clock.sleep_until(1.2)
        stop.set()
        await task
    h.clock.run(main)
    starts = h.trace.events_of(EventKind.LLM_REQUEST_START)
    assert [round(e.t, 3) for e in starts] == [0.5, 1.0]
    assert not h.manager.busy and len(h.trace.events_of(EventKind.LLM_REQUEST_CANCEL)) == 2


def test_a_live_run_can_put_both_oracle_policies_side_by_side(tmp_path) -> None:
    from demo.open.views import session_of
    from demo.tabs.compare import compare
    from demo.tabs.live import run_audio
    from kame_core.stacks.stack import Stack
    from kame_core.testing.doubles import ToneTTS

    words = words_at("what is the capital city of france", 0.5)
    audio = speech_like([(0.5, words[-1].end)], words[-1].end + 1.5)
    stack = Stack(make_stt=lambda: ScriptedSTT([words]), make_front_end=EchoFrontEnd,
                  llm=ScriptedLLM(lambda u: "paris"), tts=ToneTTS())

    steps = list(run_audio(stack, audio, ["kame", "kame-emission"], tmp_path, components="doubles", source="test"))
    loaded = steps[-1].loaded
    assert loaded is not None
    assert list(loaded.scenario.runs) == ["kame", "kame-emission"]
    policies = {k: t.config["oracle"]["policy"] for k, t in loaded.scenario.runs.items()}
    assert policies == {"kame": "restart", "kame-emission": "emission"}
    session = session_of(None)
    session.loaded = loaded
    compared = compare(session)
    assert [r[0] for r in compared.rows] == ["KAME", "KAME (emission policy)"] and compared.figure is not None
