"""Run kinds: the ways one input is run side by side (the app's Live tab and Compare view, saved scenarios).

One table, :data:`RUN_KINDS` (run id -> :class:`RunKind`): the run id a scenario's run is saved under, its label
on screen, the pipeline mode :func:`~kame_core.pipelines.make_runner` builds, and the session configuration it
implies. ``kame`` runs the default oracle policy; every other policy of
:data:`~kame_core.oracle.policies.POLICIES` gets a run kind of its own, ``kame-<policy>`` (``kame-emission``,
``kame-final-only``), without a line here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..oracle.config import OracleConfig
from ..oracle.policies import DEFAULT_POLICY, POLICIES
from ..session.config import SessionConfig

__all__ = ["MODES", "RUN_KINDS", "Mode", "RunKind", "policy_run_kind", "run_label"]

#: the pipelines an input can be answered by (:func:`~kame_core.pipelines.make_runner`)
Mode = Literal["kame", "moshi", "cascade"]
MODES: tuple[Mode, ...] = ("kame", "moshi", "cascade")


@dataclass(frozen=True)
class RunKind:
    """One way of running an input: ``id`` (the scenario's run id), ``label`` (on screen), ``mode`` (the pipeline),
    ``session`` (the session configuration it implies; None: the stack's default) and ``detail`` (what it is, in
    a few words, where a table names it in full: the eval report)."""

    id: str
    label: str
    mode: Mode
    session: SessionConfig | None = None
    detail: str = ""

    @property
    def full_label(self) -> str:
        """``label (detail)``, or the label alone."""
        return f"{self.label} ({self.detail})" if self.detail else self.label

    @property
    def policy(self) -> str | None:
        """The oracle policy of a KAME run (None: not KAME)."""
        if self.mode != "kame":
            return None
        return self.session.oracle.policy if self.session is not None else DEFAULT_POLICY


def policy_run_kind(policy: str) -> RunKind:
    """The KAME run of oracle policy ``policy`` (a key of ``POLICIES``): ``kame`` for the default one."""
    if policy == DEFAULT_POLICY:
        return RunKind("kame", "KAME", "kame", detail="tandem")
    return RunKind(f"kame-{policy.replace('_', '-')}", f"KAME ({policy.replace('_', ' ')} policy)", "kame",
                   SessionConfig(oracle=OracleConfig(policy=policy)), detail="tandem")


#: every run kind, in the order they are offered and compared: KAME per oracle policy, Moshi mode, the cascade
RUN_KINDS: dict[str, RunKind] = {kind.id: kind for kind in (
    policy_run_kind(DEFAULT_POLICY),
    *(policy_run_kind(policy) for policy in POLICIES if policy != DEFAULT_POLICY),
    RunKind("moshi", "Moshi mode", "moshi", detail="oracle off"),
    RunKind("cascade", "cascade", "cascade", detail="Unmute-like"),
)}


def run_label(run_id: str) -> str:
    """How run ``run_id`` is named on screen (an unknown id names itself)."""
    kind = RUN_KINDS.get(run_id)
    return kind.label if kind is not None else run_id
