"""Turn-taking, in one place: who holds the floor, when the user's turn is over, and who decides.

* :mod:`.tracker` -- :class:`~.tracker.UserTurnTracker`: the user's turn from voice activity and transcripts (one
  model for the cascade, the forced delay, the stand-in and the metrics); :func:`~.tracker.group_turns`;
* :mod:`.listener` -- :class:`~.listener.UserFloor`: the user's 80 ms frames heard with Silero VAD, fed to a tracker;
* :mod:`.end_of_turn` -- the semantic end-of-turn score of the words so far (SmolLM2) and the rule that combines it
  with the silence;
* :mod:`.smart_turn` -- the acoustic end-of-turn score of the sound itself (Smart Turn v3.2);
* :mod:`.floor_policies` -- the policies that turn those into a hold on the front-end, and their registry
  (:data:`~.floor_policies.FLOORS`: ``model``, ``stand-in``, ``gate``, ``smart-turn``, ``fused``).

Each module is imported by its own name (this package imports none of them), so a reader of the tracker does not
load the detectors.
"""
