"""Word diffs between runs (kame_core.analysis.diff): hand-made traces with known answers, oracle revision diffs, and
every pair of runs of every bundled scenario."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from kame_core.analysis.adherence import normalise
from kame_core.analysis.diff import (
    DiffOp,
    TimedWord,
    diff_markdown,
    diff_runs,
    revision_diffs,
    spoken_words,
    summary,
    word_diff,
)
from kame_core.analysis.trace_query import oracle_revisions
from kame_core.record.events import OracleAppend
from kame_core.record.trace import SessionTrace
from kame_core.scenario import load_scenario

from .test_adherence import SCENARIOS, made


def said(n: int, pieces: dict[int, str]) -> SessionTrace:
    """``n`` frames, no oracle; ``pieces``: frame -> text piece."""
    return made(n, pieces, {}, {})


def sydney() -> SessionTrace:
    return said(20, {10: " The", 11: " capital", 12: " is", 13: " Sydney"})


def canberra() -> SessionTrace:
    return said(20, {12: " The", 13: " capital", 14: " is", 15: " Canberra."})


def shape(ops: tuple[DiffOp, ...]) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    return [(o.op, o.a_words, o.b_words) for o in ops]


def test_spoken_words_are_whole_words_at_their_first_piece() -> None:
    words = spoken_words(said(10, {2: " Can", 3: "berra", 4: ".", 6: " —", 7: " Rome"}))
    assert [(w.word, w.frame) for w in words] == [("Canberra.", 2), ("Rome", 7)]
    assert [w.t for w in words] == pytest.approx([0.16, 0.56])


def test_a_replaced_word_has_known_stretches_and_times() -> None:
    ops = diff_runs(sydney(), canberra())
    assert shape(ops) == [("equal", ("The", "capital", "is"), ("The", "capital", "is")),
                          ("replace", ("Sydney",), ("Canberra.",))]
    equal, replace = ops
    assert (equal.a_start_t, equal.a_end_t) == pytest.approx((0.80, 0.96))
    assert (equal.b_start_t, equal.b_end_t) == pytest.approx((0.96, 1.12))
    assert (replace.a_start_t, replace.a_end_t) == pytest.approx((1.04, 1.04))
    assert (replace.b_start_t, replace.b_end_t) == pytest.approx((1.20, 1.20))
    assert replace.t == pytest.approx(1.04) and equal.t == pytest.approx(0.80)
    s = summary(ops)
    assert (s.equal, s.only_a, s.only_b, s.replaced_a, s.replaced_b) == (3, 0, 0, 1, 1)
    assert s.share_of_a_in_b == pytest.approx(0.75)


def test_inserted_and_deleted_words() -> None:
    a = said(20, {1: " Paris", 2: " is", 3: " the", 4: " capital"})
    b = said(20, {1: " Paris", 2: " is", 3: " really", 4: " the", 5: " capital", 6: " of", 7: " France."})
    ops = diff_runs(a, b)
    assert shape(ops) == [("equal", ("Paris", "is"), ("Paris", "is")), ("insert", (), ("really",)),
                          ("equal", ("the", "capital"), ("the", "capital")), ("insert", (), ("of", "France."))]
    insert = ops[1]
    assert insert.a_start_t is None and insert.a_end_t is None
    assert (insert.b_start_t, insert.b_end_t) == pytest.approx((0.24, 0.24)) and insert.t == pytest.approx(0.24)
    s = summary(ops)
    assert (s.equal, s.only_a, s.only_b, s.replaced_a, s.replaced_b, s.share_of_a_in_b) == (4, 0, 3, 0, 0, 1.0)
    back = diff_runs(b, a)
    assert [o.op for o in back] == ["equal", "delete", "equal", "delete"]
    assert (back[3].a_start_t, back[3].a_end_t) == pytest.approx((0.48, 0.56))
    s = summary(back)
    assert (s.equal, s.only_a, s.only_b) == (4, 3, 0) and s.share_of_a_in_b == pytest.approx(4 / 7)


def test_sub_word_pieces_punctuation_and_case_are_ignored() -> None:
    a = said(20, {2: " the", 3: " CAPITAL,", 4: " is", 5: " Can", 6: "berra", 7: "."})
    b = said(20, {4: " The", 5: " capital", 6: " is", 7: " canberra!"})
    ops = diff_runs(a, b)
    assert shape(ops) == [("equal", ("the", "CAPITAL,", "is", "Canberra."), ("The", "capital", "is", "canberra!"))]
    assert (ops[0].a_end_t, ops[0].b_end_t) == pytest.approx((0.40, 0.56))


def test_identical_runs_give_one_equal_stretch() -> None:
    ops = diff_runs(canberra(), canberra())
    assert [o.op for o in ops] == ["equal"] and len(ops[0].a) == 4 and ops[0].a == ops[0].b
    assert summary(ops).share_of_a_in_b == 1.0


def test_an_empty_run() -> None:
    empty = said(5, {})
    assert spoken_words(empty) == () and diff_runs(empty, empty) == ()
    s = summary(())
    assert (s.equal, s.only_a, s.only_b, s.replaced_a, s.replaced_b, s.share_of_a_in_b) == (0, 0, 0, 0, 0, None)
    ops = diff_runs(empty, sydney())
    assert shape(ops) == [("insert", (), ("The", "capital", "is", "Sydney"))]
    assert summary(ops).share_of_a_in_b is None and summary(ops).only_b == 4
    ops = diff_runs(sydney(), empty)
    assert [o.op for o in ops] == ["delete"] and summary(ops).share_of_a_in_b == 0.0
    assert diff_markdown((), "KAME", "Moshi mode") == "_No words in either run._"


def test_words_that_normalise_to_nothing_are_left_out() -> None:
    a = [TimedWord("Humans"), TimedWord("—"), TimedWord("breathe")]
    b = [TimedWord("humans"), TimedWord("breathe.")]
    assert shape(word_diff(a, b)) == [("equal", ("Humans", "breathe"), ("humans", "breathe."))]


def test_to_json_is_plain_data() -> None:
    ops = diff_runs(sydney(), canberra())
    data = [o.to_json() for o in ops]
    assert json.loads(json.dumps(data)) == data
    assert data[1] == {"op": "replace", "a": [{"word": "Sydney", "frame": 13, "t": 1.04}],
                       "b": [{"word": "Canberra.", "frame": 15, "t": 1.2}],
                       "a_start_t": 1.04, "a_end_t": 1.04, "b_start_t": 1.2, "b_end_t": 1.2}
    assert summary(ops).to_json() == {"equal": 3, "only_a": 0, "only_b": 0, "replaced_a": 1, "replaced_b": 1,
                                      "share_of_a_in_b": 0.75}


def test_markdown_has_one_line_per_change() -> None:
    md = diff_markdown(diff_runs(sydney(), canberra()), "KAME", "Moshi mode")
    assert md.splitlines() == ["- _3 words the same_", "- 1.04 s — KAME: “Sydney” · Moshi mode: “Canberra.”"]
    md = diff_markdown(diff_runs(said(5, {1: " *Yes*"}), said(5, {})), "A", "B")
    assert md == "- 0.08 s — A: “\\*Yes\\*” · B: —"


def two_revisions() -> SessionTrace:
    """Revision 1 'Humans bring gases' then revision 2 'Humans breathe out gases' (reset at frame 6)."""
    fed: dict[int, tuple[int, str | None]] = {
        0: (1, None), 1: (1, "Humans"), 2: (1, " bring"), 3: (1, " gases"),
        6: (2, None), 7: (2, "Humans"), 8: (2, " breathe"), 9: (2, " out"), 10: (2, " gases.")}
    trace = made(20, {3: " Humans", 5: " bring"}, fed, {1: 3, 2: 5})
    for t, rev, chunk in ((0.0, 1, "Humans bring gases"), (0.48, 2, "Humans br"), (0.5, 2, "eathe out gases.")):
        trace.record(t, OracleAppend(request=rev, revision=rev, text=chunk))
    return trace


def test_revision_diff_of_two_revisions() -> None:
    (rd,) = revision_diffs(two_revisions())
    assert (rd.from_revision, rd.to_revision) == (1, 2) and rd.t == pytest.approx(0.48)
    assert shape(rd.ops) == [("equal", ("Humans",), ("Humans",)), ("replace", ("bring",), ("breathe", "out")),
                             ("equal", ("gases",), ("gases.",))]
    assert all(w.t is None and w.frame is None for o in rd.ops for w in o.a + o.b)
    assert json.loads(json.dumps(rd.to_json())) == rd.to_json()
    assert diff_markdown(rd.ops, "rev 1", "rev 2").splitlines()[1] == "- rev 1: “bring” · rev 2: “breathe out”"
    assert revision_diffs(sydney()) == ()


def test_bundled_self_correction_revision_diffs_come_from_the_revision_texts() -> None:
    path = next(p for p in SCENARIOS if p.stem.startswith("06-"))
    trace = load_scenario(path).runs["kame"]
    texts = {r.revision: r.text for r in oracle_revisions(trace)}
    diffs = revision_diffs(trace)
    assert len(diffs) == len(texts) - 1 >= 1
    for rd in diffs:
        assert [w.word for o in rd.ops for w in o.a] == [w for w in texts[rd.from_revision].split() if normalise(w)]
        assert [w.word for o in rd.ops for w in o.b] == [w for w in texts[rd.to_revision].split() if normalise(w)]
        assert any(o.op != "equal" for o in rd.ops)
    assert [t1 <= t2 for t1, t2 in itertools.pairwise(rd.t for rd in diffs)] == [True] * (len(diffs) - 1)
    # "Humans bring a wide range ..." -> "Humans breathe out a mixture ...": bring is replaced
    change = next(rd for rd in diffs if texts[rd.from_revision].startswith("Humans bring"))
    replaced = [o for o in change.ops if o.op == "replace"]
    assert replaced and replaced[0].a_words[0] == "bring" and replaced[0].b_words[0] == "breathe"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_pair_of_runs_of_every_bundled_scenario(path: Path) -> None:
    runs = load_scenario(path).runs
    for (a_name, a), (b_name, b) in itertools.permutations(runs.items(), 2):
        ops = diff_runs(a, b)
        s = summary(ops)
        a_words, b_words = spoken_words(a), spoken_words(b)
        assert s.equal + s.only_a + s.replaced_a == len(a_words), (a_name, b_name)
        assert s.equal + s.only_b + s.replaced_b == len(b_words), (a_name, b_name)
        assert [w for o in ops for w in o.a] == list(a_words) and [w for o in ops for w in o.b] == list(b_words)
        if a_words:
            assert s.share_of_a_in_b is not None and 0.0 <= s.share_of_a_in_b <= 1.0
        assert json.loads(json.dumps([o.to_json() for o in ops])) == [o.to_json() for o in ops]
        assert diff_markdown(ops, a_name, b_name)
