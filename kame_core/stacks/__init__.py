"""The one composition root: how every door (``python -m kame_core.serve``, the app, the evaluation) puts its
components together.

* :mod:`.stack`  -- :class:`~.stack.Stack`, the components one input is answered with in every mode;
* :mod:`.build`  -- the CPU stack, the neural front-end's session pools, both from the settings;
* :mod:`.served` -- what the live protocol serves (warmed, admitted by the pool's slots);
* :mod:`.live`   -- the app's live stacks and its forced-delay re-runs' front-end;
* :mod:`.record` -- one input through several modes into a scenario.
"""
