"""KAME studio app entry point: `python app.py` (or `make run`) serves http://127.0.0.1:7860.

Scenario viewer: bundled scenarios (``scenarios/*.kame``) or an uploaded scenario file, shown as the
four-stream timeline with every run stacked on one time axis, a per-run summary and the audio.
"""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from demo.inspector import RUN_SUMMARY_HEADERS, run_summary_rows  # noqa: E402
from demo.timeline import compare_figure  # noqa: E402
from kame_core.clock import SAMPLE_RATE  # noqa: E402
from kame_core.scenario import Scenario, ScenarioError, load_scenario, scenario_path  # noqa: E402

SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"
PAPER_NOTE = ("Quoted from the KAME paper (arXiv 2510.02327), not measured here — spoken MT-Bench: "
              "Moshi 2.05 · KAME + gpt-4.1 6.43 at median onset 0.0 s · cascaded Unmute 7.70 at 2.1 s.")


def bundled_names(folder: Path = SCENARIOS_DIR) -> list[str]:
    return sorted(p.name[: -len(".kame")] for p in folder.glob("*.kame"))


def _view(scenario: Scenario, recorded: bool) -> tuple[object, list[list[object]], str, object]:
    fig = compare_figure(scenario.runs, title=scenario.title or scenario.name, recorded=recorded)
    first = next(iter(scenario.runs.values()))
    audio = (SAMPLE_RATE, first.output_audio) if len(first.output_audio) else None
    status = f"**{scenario.title or scenario.name}** — {len(scenario.runs)} run(s). {scenario.description}"
    return fig, run_summary_rows(scenario), status, audio


def open_bundled(name: str | None):
    if not name:
        return None, [], "No bundled scenario selected.", None
    try:
        return _view(load_scenario(scenario_path(SCENARIOS_DIR, name)), recorded=True)
    except ScenarioError as err:
        return None, [], f"**Cannot open scenario** — {err}", None


def open_upload(file: str | None):
    if not file:
        return None, [], "Upload a scenario file (.kame).", None
    try:
        return _view(load_scenario(file), recorded=True)
    except ScenarioError as err:
        return None, [], f"**Invalid scenario file** — {err}", None


def build_app() -> gr.Blocks:
    names = bundled_names()
    with gr.Blocks(title="KAME studio") as app:
        gr.Markdown("# KAME studio\nTandem speech-to-speech (KAME): the four streams of a session on one clock.")
        with gr.Row():
            choice = gr.Dropdown(names, value=names[0] if names else None, label="Bundled scenario")
            upload = gr.File(label="…or a scenario file (.kame)", file_types=[".kame"], type="filepath")
        status = gr.Markdown()
        plot = gr.Plot(label="Timeline")
        audio = gr.Audio(label="Output audio (first run)", type="numpy", interactive=False)
        table = gr.Dataframe(headers=RUN_SUMMARY_HEADERS, interactive=False, wrap=True)
        gr.Markdown(f"<small>{PAPER_NOTE}</small>")
        outputs = [plot, table, status, audio]
        choice.change(open_bundled, choice, outputs)
        upload.change(open_upload, upload, outputs)
        app.load(open_bundled, choice, outputs)
    return app


if __name__ == "__main__":
    build_app().launch(server_name=os.environ.get("KAME_HOST", "127.0.0.1"),
                       server_port=int(os.environ.get("KAME_PORT", "7860")))
