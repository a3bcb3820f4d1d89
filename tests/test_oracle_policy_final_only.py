"""The final-only oracle policy (kame_core/oracle/policies/final_only.py): the LLM is asked only on the STT final
transcript, and every chunk of its answer is fed; on the virtual clock, through the tandem runner."""
from __future__ import annotations

import pytest

from kame_core.analysis.trace_query import llm_requests
from kame_core.clock import VirtualClock
from kame_core.oracle.config import OracleConfig
from kame_core.pipelines.run_kinds import RUN_KINDS
from kame_core.pipelines.tandem import TandemRunner
from kame_core.record.trace import EventKind
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at


def test_requests_start_only_at_finals_and_every_chunk_is_fed() -> None:
    first = words_at("what is the capital of france", 0.3)
    second = words_at("and of italy please", first[-1].end + 1.5)
    audio = speech_like([(s[0].start, s[-1].end) for s in (first, second)], second[-1].end + 3.0)
    answers = {"france": "paris is the capital of france", "please": "rome is the capital of italy"}
    llm = ScriptedLLM(lambda u: answers["please" if "please" in u else "france"], first_chunk_s=0.3)
    config = SessionConfig(oracle=OracleConfig(policy="final_only"))
    trace = TandemRunner(EchoFrontEnd(), ScriptedSTT([first, second]), llm, config, VirtualClock()).run_sync(audio)

    assert trace.config["oracle"]["policy"] == "final_only"
    finals = [e.t for e in trace.events_of(EventKind.STT_FINAL)]
    starts = trace.events_of(EventKind.LLM_REQUEST_START)
    assert len(finals) == 2 and trace.events_of(EventKind.STT_PARTIAL)  # partials were heard, never asked on
    assert [e.data["reason"] for e in starts] == ["final", "final"]
    for final_t, start in zip(finals, starts, strict=True):  # at the first poll after each final
        assert final_t <= start.t < final_t + config.oracle.interval_s + 1e-9
        assert start.data["policy"] == "final_only" and start.data["transcript"].endswith(
            " ".join(w.text for w in (first if start is starts[0] else second)))
    # every chunk of each answer feeds the oracle stream: one revision per request, the whole answer appended
    requests = llm_requests(trace)
    assert [r.outcome for r in requests] == ["finished", "finished"]
    appended = {r.request: "".join(e.data["text"] for e in trace.events_of(EventKind.ORACLE_APPEND)
                                   if e.data["request"] == r.request).split() for r in requests}
    assert appended == {1: answers["france"].split(), 2: answers["please"].split()}
    assert trace.spoken_text().split()[-1] == "italy"


def test_it_gets_a_run_kind_and_a_misspelt_id_names_the_known_ones() -> None:
    kind = RUN_KINDS["kame-final-only"]
    assert (kind.mode, kind.policy) == ("kame", "final_only")
    with pytest.raises(ValueError, match="restart, emission, final_only"):
        OracleConfig(policy="final-only")
