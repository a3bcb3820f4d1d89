"""Simulated Oracle Augmentation and dataset tools, compatible with the official KAME training layout.

* :mod:`.transcript`     -- ``text/<id>.json`` word transcripts, strictly validated
* :mod:`.oracle_records` -- oracle requests/records from a transcript (official rules, ``oracle_raw`` format)
* :mod:`.simulators`     -- who writes the ``prediction``: offline deterministic, or any StreamingLLM
  (:mod:`.simulator_factory` parses ``--simulator``; :mod:`.prediction_text` enforces the spoken format)
* :mod:`.oracle_stream`  -- records on the 80 ms frame grid (oracle tokens, revisions, hint levels) + npz export
  (:mod:`.word_tokenizer`: a model-free word-level tokenizer for it)
* :mod:`.spoken_dataset` -- question-answer pairs -> TTS -> ``audio/``, ``text/``, ``oracle_raw/`` (resumable)
* :mod:`.training_dialogue` -- a layout dialogue read back as session streams (24 kHz audio per speaker,
  inner monologue and oracle stream on frames), for importing it into the app
* :mod:`.layout`         -- reading and writing the canonical layout's files, atomically
* :mod:`.cli`            -- ``python -m kame_core.augment {oracle,streams,dataset} ...``
"""
