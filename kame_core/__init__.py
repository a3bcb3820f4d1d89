"""KAME core: the four streams, the two clocks, the oracle manager and the session driver.

Where things are:

* :mod:`kame_core.clock`     -- frame clock (12.5 Hz), :class:`RealTimeClock`, :class:`VirtualClock`
* :mod:`kame_core.record.trace`     -- :class:`SessionTrace`: the four streams per frame, events, provenance
* :mod:`kame_core.protocols` -- FrontEnd / StreamingSTT / StreamingLLM / TTS / TextTokenizer
* :mod:`kame_core.oracle.manager`    -- :class:`OracleManager` (official KAME oracle semantics), the oracle stream
* :mod:`kame_core.session`   -- :class:`SessionDriver`: one frame loop + STT loop + trace for every pipeline;
  sources (recorded, live), sinks, the user-turn tracker
* :mod:`kame_core.analysis.trace_query` -- one way to read a trace: LLM requests, oracle revisions, self-corrections
* :mod:`kame_core.analysis.metrics`   -- onset latency, revisions, self-corrections
* :mod:`kame_core.scenario`  -- portable scenario files (trace JSON + WAV), strict validation
* :mod:`kame_core.neural`    -- KAME LM / generator on moshi, checkpoint loading, the neural front-end
* :mod:`kame_core.frontends` -- the CPU stand-in front-end
* :mod:`kame_core.stt`, :mod:`kame_core.llm`, :mod:`kame_core.tts` -- back-ends behind the protocols
* :mod:`kame_core.pipelines` -- tandem (KAME, Moshi mode) and cascade pipelines on the driver, replay
* :mod:`kame_core.stacks`    -- the one composition root: every door's components put together
* :mod:`kame_core.turns`     -- turn-taking in one place: the user's turn (tracker, VAD listener), the end-of-turn
  detectors (words, sound), the floor policies (registry)
* :mod:`kame_core.serve`     -- the live server (``/api/chat``); :mod:`kame_core.eval` -- evaluation commands
* :mod:`kame_core.augment`   -- Simulated Oracle Augmentation, dataset builder, training-dialogue import
* :mod:`kame_core.executors` -- where batch work runs: local processes (default) or Ray actors (optional)
"""
