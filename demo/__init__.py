"""The Gradio visualiser of KAME studio (layout, timeline figure, callbacks)."""
