"""The record of a session: its four streams frame by frame and its timed events (:mod:`.trace`), the events'
typed payloads (:mod:`.events`) and the rules every saved field obeys (:mod:`.schema`), and the JSON-lines files
they are written to (:mod:`.jsonl`). Nothing here computes a figure: :mod:`kame_core.analysis` reads records."""
