"""The oracle: when the back-end LLM is asked, and what of its streamed answer reaches the front-end.

:mod:`.config` (the oracle's settings and the conversation the LLM is asked about), :mod:`.policies` (when a
request starts, and whether a newer answer replaces the older one), :mod:`.manager` (the live requests and the
oracle token stream fed to the front-end, one token per frame)."""
