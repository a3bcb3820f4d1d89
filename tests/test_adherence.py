"""Oracle adherence (kame_core.analysis.adherence): which words of each oracle revision the front-end then spoke, and
how long after they were fed -- on hand-made traces whose answers are known, on test-double sessions and on every
bundled scenario."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kame_core.analysis.adherence import SessionAdherence, normalise, oracle_adherence
from kame_core.analysis.trace_query import self_corrections
from kame_core.clock import FRAME_SECONDS, SAMPLES_PER_FRAME
from kame_core.record.events import OracleReset, SelfCorrection
from kame_core.record.trace import FrameRecord, OracleToken, SessionTrace
from kame_core.scenario import load_scenario
from kame_core.testing.sessions import build_session, mountain_session

SILENT = np.zeros(SAMPLES_PER_FRAME, np.float32)
SCENARIOS = sorted((Path(__file__).resolve().parent.parent / "scenarios").glob("*.kame"))


def made(n: int, said: dict[int, str], fed: dict[int, tuple[int, str | None]], levels: dict[int, int | None],
         mode: str = "kame") -> SessionTrace:
    """``n`` frames; ``said``: frame -> text piece; ``fed``: frame -> (revision, oracle piece; None for its start
    token); ``levels``: revision -> hint level, each with an oracle_reset event in this order (at its start token,
    else with the one before)."""
    trace = SessionTrace(mode=mode)
    start = 0
    for rev, level in levels.items():
        start = min((i for i, (r, _) in fed.items() if r == rev), default=start)
        trace.record(start * FRAME_SECONDS, OracleReset(revision=rev, request=rev, hint_level=level))
    for i in range(n):
        oracle = OracleToken()
        if i in fed:
            rev, piece = fed[i]
            oracle = OracleToken(token=1, piece="", revision=rev, is_start=True) if piece is None else \
                OracleToken(token=100 + i, piece=piece, revision=rev)
        text = said.get(i, "")
        trace.append_frame(FrameRecord(text_piece=text, text_token=200 + i if text else None, oracle=oracle),
                           SILENT, SILENT)
    return trace.finish()


def canberra() -> SessionTrace:
    """'The capital is Canberra.' fed at frames 10-14 (start token at 9), 'The capital is Sydney' said at 12-16."""
    fed: dict[int, tuple[int, str | None]] = {9: (1, None), 10: (1, "The"), 11: (1, " capital"), 12: (1, " is"),
                                               13: (1, " Can"), 14: (1, "berra.")}
    said = {12: " The", 13: " capital", 15: " is", 16: " Sydney"}
    return made(30, said, fed, {1: 5})


def test_a_revision_half_followed_has_known_share_lags_and_replacement() -> None:
    result = oracle_adherence(canberra())
    (rev,) = result.revisions
    assert rev.revision == 1 and rev.hint_level == 5 and (rev.start_frame, rev.end_frame) == (9, None)
    assert [w.word for w in rev.words] == ["The", "capital", "is", "Canberra."]
    assert [w.fed_frame for w in rev.words] == [10, 11, 12, 13]
    assert [w.spoken_frame for w in rev.words] == [12, 13, 15, None]
    assert [w.lag_s for w in rev.words[:3]] == pytest.approx([0.16, 0.16, 0.24])
    assert rev.words[3].lag_s is None and rev.words[3].spoken_t is None and not rev.words[3].spoken
    assert rev.words[0].fed_t == pytest.approx(0.8) and rev.words[0].spoken_t == pytest.approx(0.96)
    assert rev.spoken_share == pytest.approx(0.75) and (rev.n_spoken, rev.n_fed) == (3, 4)
    assert rev.said_instead == ("Sydney",)
    assert result.spoken_share == pytest.approx(0.75)
    assert result.median_lag_s == pytest.approx(0.16)
    assert result.p90_lag_s == pytest.approx(0.16 + 0.8 * 0.08)  # linear interpolation over [0.16, 0.16, 0.24]


def test_to_json_is_plain_data() -> None:
    data = oracle_adherence(canberra()).to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["spoken_share"] == 0.75 and data["n_fed"] == 4 and data["n_spoken"] == 3
    (rev,) = data["revisions"]
    assert rev["said_instead"] == ["Sydney"] and rev["spoken_share"] == 0.75
    assert rev["words"][0] == {"word": "The", "fed_frame": 10, "fed_t": 0.8, "spoken_frame": 12, "spoken_t": 0.96,
                               "lag_s": 0.16}
    assert rev["words"][3]["spoken_frame"] is None and rev["words"][3]["lag_s"] is None


def test_a_newer_revision_takes_the_words_said_after_it_was_fed() -> None:
    """Revision 1 'The capital is Sydney' (start 5, words 6-9) is replaced by revision 2 'The capital is Canberra.'
    (start 20, words 21-24) mid-sentence: 'The capital' (frames 10, 14) count for 1; 'is Canberra.' (25, 28)
    for 2 only -- and 'The capital' said before frame 20 never for 2."""
    fed: dict[int, tuple[int, str | None]] = {
        5: (1, None), 6: (1, " The"), 7: (1, " capital"), 8: (1, " is"), 9: (1, " Sydney"),
        20: (2, None), 21: (2, " The"), 22: (2, " capital"), 23: (2, " is"), 24: (2, " Canberra.")}
    said = {10: " The", 14: " capital", 25: " is", 28: " Canberra."}
    result = oracle_adherence(made(40, said, fed, {1: 2, 2: 5}))
    first, second = result.revisions
    assert (first.start_frame, first.end_frame, second.start_frame, second.end_frame) == (5, 20, 20, None)
    assert [w.spoken_frame for w in first.words] == [10, 14, None, None]
    assert [w.spoken_frame for w in second.words] == [None, None, 25, 28]
    assert [w.lag_s for w in first.words[:2]] == pytest.approx([0.32, 0.56])
    assert [w.lag_s for w in second.words[2:]] == pytest.approx([0.16, 0.32])
    assert first.spoken_share == second.spoken_share == pytest.approx(0.5)
    assert first.said_instead == second.said_instead == ()
    assert result.spoken_share == pytest.approx(0.5) and result.median_lag_s == pytest.approx(0.32)


def test_a_revision_never_fed_has_no_share_and_is_left_out() -> None:
    """Revision 2 is reset but superseded before any token; revision 3 gets only its start token."""
    fed: dict[int, tuple[int, str | None]] = {2: (1, None), 3: (1, " Paris"), 10: (3, None)}
    said = {5: " paris", 12: " Lyon"}
    result = oracle_adherence(made(20, said, fed, {1: 5, 2: None, 3: 5}))
    assert [r.revision for r in result.revisions] == [1, 2, 3]
    one, two, three = result.revisions
    assert one.spoken_share == 1.0 and one.end_frame == 10 and one.words[0].lag_s == pytest.approx(0.16)
    assert two.words == () and two.spoken_share is None and two.start_frame is None and two.end_frame is None
    assert three.words == () and three.spoken_share is None and three.start_frame == 10
    assert result.spoken_share == 1.0 and (result.n_fed, result.n_spoken) == (1, 1)


def test_a_run_without_oracle_gives_an_empty_result() -> None:
    said = {3: " Hello", 4: " there."}
    for mode in ("moshi", "cascade"):
        result = oracle_adherence(made(10, said, {}, {}, mode=mode))
        assert result == SessionAdherence(revisions=(), spoken_share=None, median_lag_s=None, p90_lag_s=None)
        assert result.to_json()["revisions"] == [] and result.to_json()["spoken_share"] is None


def test_sub_word_pieces_make_one_word_and_case_and_punctuation_are_ignored() -> None:
    fed: dict[int, tuple[int, str | None]] = {0: (1, None), 1: (1, " It's"), 2: (1, " Can"), 3: (1, "berra"),
                                              4: (1, "."), 5: (1, " —"), 6: (1, " Australia!")}
    said = {7: " its", 9: " CAN", 10: "BERRA", 12: ",", 14: " australia"}
    (rev,) = oracle_adherence(made(20, said, fed, {1: 5})).revisions
    assert [w.word for w in rev.words] == ["It's", "Canberra.", "Australia!"]  # a lone dash is no word
    assert [normalise(w.word) for w in rev.words] == ["its", "canberra", "australia"]
    assert [w.fed_frame for w in rev.words] == [1, 2, 6]
    assert [w.spoken_frame for w in rev.words] == [7, 9, 14]
    assert rev.spoken_share == 1.0 and rev.said_instead == ()
    assert rev.words[1].lag_s == pytest.approx(7 * FRAME_SECONDS)


def test_a_word_said_before_it_was_fed_is_not_spoken() -> None:
    """'Paris' is fed at frame 15; the front-end already said it at frame 13 (of its own accord)."""
    fed: dict[int, tuple[int, str | None]] = {10: (1, None), 11: (1, " It"), 12: (1, " is"), 15: (1, " Paris.")}
    early = {11: " It", 12: " is", 13: " Paris"}
    (rev,) = oracle_adherence(made(30, early, fed, {1: 5})).revisions
    assert [w.spoken_frame for w in rev.words] == [11, 12, None]     # fed and said the same frame: lag 0
    assert rev.words[0].lag_s == 0.0 and rev.spoken_share == pytest.approx(2 / 3)
    assert rev.said_instead == ()                                    # said too early, not instead
    (rev,) = oracle_adherence(made(30, {**early, 20: " Paris!"}, fed, {1: 5})).revisions
    assert [w.spoken_frame for w in rev.words] == [11, 12, 20]       # said again after it was fed: that counts
    assert rev.words[2].lag_s == pytest.approx(5 * FRAME_SECONDS) and rev.said_instead == ()
    before = {8: " It", 9: " is", 13: " Paris"}                      # before the revision's window: nothing counts
    (rev,) = oracle_adherence(made(30, before, fed, {1: 5})).revisions
    assert rev.spoken_share == 0.0 and rev.said_instead == ()


def test_words_abandoned_in_a_self_correction_still_count_as_spoken() -> None:
    """Revision 1 'Humans bring gases' is said in part ('Humans bring'), then revision 2 'Humans breathe out'
    makes the front-end correct itself: 'no, wait, breathe out'."""
    fed: dict[int, tuple[int, str | None]] = {
        0: (1, None), 1: (1, "Humans"), 2: (1, " bring"), 3: (1, " gases"),
        6: (2, None), 7: (2, "Humans"), 8: (2, " breathe"), 9: (2, " out.")}
    said = {3: " Humans", 5: " bring", 8: " no,", 9: " wait,", 11: " breathe", 13: " out."}
    trace = made(20, said, fed, {1: 3, 2: 5})
    trace.record(8 * FRAME_SECONDS, SelfCorrection(frame=8, abandoned_text="Humans bring", abandoned_frames=[3, 5],
                                                   revision=2, new_text="breathe out."))
    one, two = oracle_adherence(trace).revisions
    assert [w.spoken_frame for w in one.words] == [3, 5, None] and one.said_instead == ()
    assert [w.spoken_frame for w in two.words] == [None, 11, 13]
    assert two.said_instead == ("no,", "wait,")
    assert oracle_adherence(trace).spoken_share == pytest.approx(4 / 6)


def check_invariants(trace: SessionTrace, result: SessionAdherence) -> None:
    """What holds on any run: shares in [0, 1], words said in their revision's window at or after they were fed,
    lags within the run, a spoken word counted for one revision at most, the session share over all fed words."""
    said_frames: list[int] = []
    for rev in result.revisions:
        assert rev.n_fed == len(rev.words)
        if not rev.words:
            assert rev.spoken_share is None and rev.said_instead == ()
            continue
        assert rev.start_frame is not None and rev.spoken_share is not None and 0.0 <= rev.spoken_share <= 1.0
        assert rev.spoken_share == pytest.approx(rev.n_spoken / rev.n_fed)
        end = trace.n_frames if rev.end_frame is None else rev.end_frame
        for w in rev.words:
            assert rev.start_frame <= w.fed_frame < end and w.word.strip() == w.word and normalise(w.word)
            if w.spoken_frame is None:
                assert w.lag_s is None and w.spoken_t is None
                continue
            assert w.fed_frame <= w.spoken_frame < end and not trace.frames[w.spoken_frame].text_is_padding
            assert w.lag_s is not None and 0.0 <= w.lag_s <= trace.duration
            assert normalise(trace.frames[w.spoken_frame].text_piece)  # the first piece of the word said
            said_frames.append(w.spoken_frame)
    assert len(said_frames) == len(set(said_frames))
    if result.n_fed:
        assert result.spoken_share == pytest.approx(result.n_spoken / result.n_fed)
    else:
        assert result.spoken_share is None
    if said_frames:
        assert result.median_lag_s is not None and result.p90_lag_s is not None
        assert 0.0 <= result.median_lag_s <= result.p90_lag_s <= trace.duration
    else:
        assert result.median_lag_s is None and result.p90_lag_s is None
    assert json.loads(json.dumps(result.to_json())) == result.to_json()


def test_test_double_sessions_hold_the_invariants() -> None:
    for trace in (mountain_session(), build_session("kame", 40.0)):
        result = oracle_adherence(trace)
        assert result.revisions and result.n_spoken > 0
        check_invariants(trace, result)
    moshi = oracle_adherence(mountain_session("moshi"))
    assert moshi.revisions == () and moshi.spoken_share is None


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_bundled_scenario_holds_the_invariants(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load_scenario(path)
    for name, trace in scenario.runs.items():
        result = oracle_adherence(trace)
        check_invariants(trace, result)
        if trace.mode == "kame":
            assert result.revisions and result.spoken_share is not None, name
        else:
            assert result.revisions == () and result.spoken_share is None, name
    assert capsys.readouterr() == ("", "")


def test_bundled_self_correction_counts_the_abandoned_words() -> None:
    """06: 'Humans bring — no, wait, breathe out ...': 'Humans bring', abandoned, are spoken words of revision 2."""
    path = next(p for p in SCENARIOS if p.stem.startswith("06-"))
    trace = load_scenario(path).runs["kame"]
    ((_, correction),) = self_corrections(trace)
    result = oracle_adherence(trace)
    spoken = {w.spoken_frame: (rev.revision, w.word) for rev in result.revisions for w in rev.words if w.spoken}
    abandoned = [spoken.get(f) for f in correction.abandoned_frames]
    assert correction.revision is not None and abandoned
    assert all(a is not None and a[0] < correction.revision for a in abandoned)


def test_a_revision_fed_without_a_reset_event_is_read_from_the_frames() -> None:
    fed: dict[int, tuple[int, str | None]] = {4: (7, " Rome"), 5: (7, " is")}
    (rev,) = oracle_adherence(made(10, {6: " Rome"}, fed, {})).revisions
    assert (rev.revision, rev.hint_level, rev.text, rev.start_frame) == (7, None, "Rome is", 4)
    assert [w.spoken_frame for w in rev.words] == [6, None] and rev.spoken_share == 0.5
