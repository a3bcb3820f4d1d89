"""KAME studio app entry point: `python app.py` (or `make run`) serves http://127.0.0.1:7860."""
from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from demo.inspector import RUN_SUMMARY_HEADERS, run_summary_rows  # noqa: E402
from kame_core.scenario import ScenarioError, load_scenario  # noqa: E402


def inspect(file: str | None) -> tuple[list[list[object]], str]:
    if not file:
        return [], "Upload a scenario file (.kame) to inspect it."
    try:
        scenario = load_scenario(file)
    except ScenarioError as err:
        return [], f"**Invalid scenario file** — {err}"
    return run_summary_rows(scenario), f"**{scenario.title or scenario.name}** — {len(scenario.runs)} run(s)"


def build_app() -> gr.Blocks:
    with gr.Blocks(title="KAME studio") as app:
        gr.Markdown("# KAME studio\nTandem speech-to-speech (KAME, arXiv 2510.02327): scenario inspector.")
        upload = gr.File(label="Scenario file (.kame)", file_types=[".kame"], type="filepath")
        status = gr.Markdown("Upload a scenario file (.kame) to inspect it.")
        table = gr.Dataframe(headers=RUN_SUMMARY_HEADERS, interactive=False)
        upload.change(inspect, upload, [table, status])
    return app


if __name__ == "__main__":
    build_app().launch(server_name=os.environ.get("KAME_HOST", "127.0.0.1"),
                       server_port=int(os.environ.get("KAME_PORT", "7860")))
