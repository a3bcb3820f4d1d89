"""The Forced delay tab: re-run the open input's KAME run with the front-end held silent until a chosen delay after
the user stops (the STT and the oracle replayed from the recording, the front-end re-run now), and the
latency–quality curve over 0–3 s."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gradio as gr

from kame_core.pipelines.replay import REPLAY_LABEL, ReplayUnavailable
from kame_core.protocols import PoolFull
from kame_core.record.trace import SessionTrace
from kame_core.settings import Settings
from kame_core.stacks.live import RerunFrontEnd

from ..app.scoring import MTBenchJudge, judge_for
from ..app.stacks import rerun_front_end
from ..figures.delay_curve import curve_figure
from ..figures.timeline import compare_figure
from ..open import views
from ..open.delay_runs import (
    DELAYS_S,
    DelayOutcome,
    describe_outcome,
    front_end_difference,
    reference_answers,
    run_delay,
)
from ..open.results import Plotted

if TYPE_CHECKING:
    from . import Wiring

#: what the Forced-delay tab says until its re-run or curve is made for the open input
DELAY_NOT_RUN = ("*Not run for this input yet* — choose a delay and press **Re-run with this delay** to run it for "
                 "this input.")
CURVE_NOT_RUN = "*Not run for this input yet* — press **Latency–quality curve (0–3 s)** to run it for this input."


@dataclass(frozen=True)
class DelayTab:
    """The Forced delay tab's components."""

    delay: gr.Slider
    rerun: gr.Button
    curve: gr.Button
    text: gr.Markdown
    plot: gr.Plot
    curve_plot: gr.Plot
    curve_text: gr.Markdown


def build() -> DelayTab:
    """The tab's layout, inside the current ``gr.Tab``."""
    gr.Markdown("Re-run this input's KAME run with the front-end held silent until *delay* after the "
                "user stops. The STT and the oracle LLM are **replayed from the recording** (they do not "
                "depend on the delay); the front-end is re-run now — the **CPU stand-in**, not the "
                "trained model.")
    with gr.Row():
        delay = gr.Slider(0.0, 3.0, value=1.0, step=0.1, label="Forced delay (s)")
        rerun = gr.Button("Re-run with this delay", variant="primary", elem_id="kame-delay-run")
        curve = gr.Button("Latency–quality curve (0–3 s)", elem_id="kame-curve-run")
    text = gr.Markdown(elem_id="kame-delay-text")
    plot = gr.Plot(label="Recorded vs re-run", show_label=False, elem_id="kame-plot-delay")
    curve_plot = gr.Plot(label="Latency–quality (offline proxy score unless a judge is keyed)",
                         elem_id="kame-plot-curve")
    curve_text = gr.Markdown(elem_id="kame-curve-text")
    return DelayTab(delay, rerun, curve, text, plot, curve_plot, curve_text)


def wire(tab: DelayTab, wiring: Wiring) -> None:
    """The button and the slider's release re-run with the delay chosen; the other button draws the curve."""
    state, settings = wiring.state, wiring.settings
    rerun = functools.partial(forced_delay, settings=settings)
    tab.rerun.click(rerun, [tab.delay, state], [state, tab.plot, tab.text], api_name="forced_delay")
    tab.delay.release(rerun, [tab.delay, state], [state, tab.plot, tab.text], api_visibility="private")
    tab.curve.click(functools.partial(delay_curve, settings=settings), state,
                    [state, tab.curve_plot, tab.curve_text], api_name="delay_curve")


def cleared(session: views.AppSession) -> tuple[Plotted | None, Plotted | None]:
    """The tab's re-run and curve as an open leaves them: cleared with a line saying so (or why nothing can be
    re-run) when they are about another input, None (kept as they are) when about this very one."""
    shown = session.loaded.key if session.loaded is not None else None
    stale = shown is None or session.delay_tab_of != shown
    session.delay_tab_of = shown
    if not stale:
        return None, None
    return (Plotted(session, None, _not_run(session, DELAY_NOT_RUN)),
            Plotted(session, None, _not_run(session, CURVE_NOT_RUN)))


def _not_run(session: views.AppSession, line: str) -> str:
    """The Forced-delay tab before anything is run: why nothing can be, or what to press."""
    try:
        _kame_run(session)
    except ReplayUnavailable as err:
        return f"*Nothing to re-run:* {err}."
    return line


def _kame_run(session: views.AppSession) -> SessionTrace:
    """The open input's KAME run, the one a forced delay re-runs (:class:`ReplayUnavailable` says why none)."""
    if session.loaded is None:
        raise ReplayUnavailable("open a scenario first")
    runs = session.loaded.scenario.runs
    if "kame" in runs:
        return runs["kame"]
    found = next((t for t in runs.values() if t.mode == "kame"), None)
    if found is None:
        raise ReplayUnavailable("this scenario has no KAME run to re-run (imported training dialogues and "
                                "Moshi / cascade runs have no recorded oracle back-end)")
    return found


def _judge(session: views.AppSession, settings: Settings) -> MTBenchJudge | None:
    """The MT-Bench judge for the opened input's first question when a key is set (else the proxy scores)."""
    loaded = session.loaded
    if loaded is None or not loaded.questions:
        return None
    return judge_for(loaded.questions[0], loaded.category, settings)


def forced_delay(delay_s: float, state: views.AppSession | None = None, *, front_end: RerunFrontEnd | None = None,
                 settings: Settings | None = None) -> Plotted:
    """Re-run the opened input's KAME run with ``delay_s`` of forced delay: (session, figure, markdown).
    ``front_end`` (default: :func:`demo.app.stacks.rerun_front_end` of ``settings``) makes the re-run's front-end."""
    settings = settings or Settings()
    session = views.session_of(state)
    session.delay_tab_of = session.loaded.key if session.loaded is not None else None
    try:
        kame = _kame_run(session)
        delay = float(delay_s)
        factory = front_end or rerun_front_end(settings.stack)
        refs, note = reference_answers(session.loaded.references, kame)  # type: ignore[union-attr]
        outcome = run_delay(kame, delay, factory.make, refs, cache=session.delay_cache,
                            cache_key=session.loaded.key, judge=_judge(session, settings))  # type: ignore[union-attr]
    except (ReplayUnavailable, ValueError, TypeError, PoolFull) as err:
        return Plotted(session, None, views.refusal("Cannot re-run", err))
    recorded_ms = int(kame.config.get("forced_delay_ms", 0))
    traces = {f"KAME as recorded (forced delay {recorded_ms / 1000:.1f} s)": kame,
              f"re-run, forced delay {outcome.delay_s:.1f} s": outcome.trace}
    fig = compare_figure(traces, title=f"{session.loaded.title} — forced delay {outcome.delay_s:.1f} s",  # type: ignore[union-attr]
                         recorded=True)
    differs = front_end_difference(kame, outcome.trace)
    text = (describe_outcome(outcome, note) + (f"\n\n**{differs}**" if differs else "")
            + f"\n\n<small>{REPLAY_LABEL}; front-end: {factory.description}. "
            "Exact for the first turn; later turns reuse the recorded back-end answers.</small>")
    return Plotted(session, fig, text)


def same_words(outcomes: list[DelayOutcome]) -> str:
    """A line when every delay said the same words in reply to each user turn (its curve is flat for that): the
    delay moved when the answers began, not what they said. "" otherwise."""
    turns = {len(o.turns) for o in outcomes}
    if len(outcomes) < 2 or len(turns) != 1:
        return ""
    for k in range(turns.pop()):
        if len({o.turns[k].answer.strip() for o in outcomes}) != 1:
            return ""
    return ("*At every forced delay each user turn got the same words: on this input the delay moves when the "
            "answer begins, not what it says (a flat curve).*\n\n")


def delay_curve(state: views.AppSession | None = None, *, front_end: RerunFrontEnd | None = None,
                settings: Settings | None = None) -> Plotted:
    """The latency–quality curve of the opened input over :data:`DELAYS_S`: (session, figure, markdown)."""
    settings = settings or Settings()
    session = views.session_of(state)
    session.delay_tab_of = session.loaded.key if session.loaded is not None else None
    try:
        kame = _kame_run(session)
        factory = front_end or rerun_front_end(settings.stack)
        refs, note = reference_answers(session.loaded.references, kame)  # type: ignore[union-attr]
        if not refs:
            raise ReplayUnavailable(note)
        judge = _judge(session, settings)
        outcomes = [run_delay(kame, d, factory.make, refs, cache=session.delay_cache,
                              cache_key=session.loaded.key, judge=judge) for d in DELAYS_S]  # type: ignore[union-attr]
    except (ReplayUnavailable, ValueError, PoolFull) as err:
        return Plotted(session, None, views.refusal("Cannot draw the curve", err))
    fig = curve_figure(outcomes, note, session.loaded.title)  # type: ignore[union-attr]
    differs = front_end_difference(kame, outcomes[0].trace) if outcomes else ""
    several = any(len(o.turns) > 1 for o in outcomes)
    rows = "\n".join(
        f"| {o.delay_s:.1f} s |" + (f" {t.turn + 1} |" if several else "")
        + f" {'n/a' if t.onset_latency_s is None else f'{t.onset_latency_s:+.2f} s'}"
        f" | {'—' if t.score is None else f'{t.score.score:.2f}'} | {t.answer[:90]} |"
        for o in outcomes for t in (o.turns or (o.first,)))
    label = outcomes[0].score.label if outcomes and outcomes[0].score else "score"
    head = ("| forced delay | turn | onset latency | score | spoken answer |\n|---|---|---|---|---|" if several
            else "| forced delay | onset latency | score | spoken answer |\n|---|---|---|---|")
    text = (f"Scores: **{label}**; references: {note}.\n\n{head}\n{rows}\n\n" + same_words(outcomes)
            + (f"**{differs}**\n\n" if differs else "")
            + f"<small>{REPLAY_LABEL}; front-end: {factory.description}.</small>")
    return Plotted(session, fig, text)
