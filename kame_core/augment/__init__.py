"""Simulated Oracle Augmentation and dataset tools, compatible with the official KAME training layout.

* :mod:`.transcript`     -- ``text/<id>.json`` word transcripts, strictly validated
* :mod:`.oracle_records` -- oracle requests/records from a transcript (official rules, ``oracle_raw`` format)
* :mod:`.simulators`     -- who writes the ``prediction``: offline deterministic, or any StreamingLLM
* :mod:`.oracle_stream`  -- records on the 80 ms frame grid (oracle tokens, revisions, hint levels) + npz export
* :mod:`.cli`            -- ``python -m kame_core.augment oracle ...``
"""
