"""Oracle policies: when the back-end LLM is asked and which of its answers the front-end hears.

:data:`POLICIES` is the one list of them (id -> :class:`PolicyFactory`); ``PolicyConfig.policy`` is checked
against it, the eval's ``--oracle-policy`` offers its ids, and every policy but the default gets a run kind of
its own (:mod:`kame_core.pipelines.run_kinds`). A policy is a subclass of :class:`OraclePolicy`
(:mod:`.base`); :class:`~kame_core.oracle.manager.OracleManager` runs it.

Adding one: a module here with its :class:`OraclePolicy` subclass (and, if it has options, their frozen dataclass as
its ``Options``), one line in :data:`POLICIES`, one test.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .base import ChunkVerdict, Drop, NoOptions, OraclePolicy, OracleState, PolicyConfig, StartPoint, make_options
from .emission import EmissionOptions, EmissionPolicy
from .final_only import FinalOnlyPolicy
from .restart import RestartOptions, RestartPolicy

__all__ = ["DEFAULT_POLICY", "POLICIES", "ChunkVerdict", "Drop", "EmissionOptions", "EmissionPolicy", "FinalOnlyPolicy",
           "NoOptions", "OraclePolicy", "OracleState", "PolicyFactory", "RestartOptions", "RestartPolicy", "StartPoint",
           "make_policy"]


@dataclass(frozen=True)
class PolicyFactory:
    """A policy's class, and what it does in one line (for help texts and the UI)."""

    policy: type[OraclePolicy]
    description: str

    def __call__(self, config: PolicyConfig) -> OraclePolicy:
        return self.policy(config)

    def options(self, values: Mapping[str, Any], policy: str) -> Any:
        """The policy's options (its :attr:`~OraclePolicy.Options`) from ``values``; ValueError naming what is
        wrong."""
        return make_options(self.policy.Options, values, policy)


DEFAULT_POLICY = "restart"  #: KAME's original; the one plain ``kame`` runs use

#: every oracle policy, by the id recorded in traces (``config.oracle.policy``)
POLICIES: dict[str, PolicyFactory] = {
    "restart": PolicyFactory(RestartPolicy, "the original KAME policy: restart the stream when the user said 2 "
                                            "more words or a final landed (at most 5 starts in 2 s)"),
    "emission": PolicyFactory(EmissionPolicy, "the official repository's newer emission-based adoption: a stream "
                                              "per poll while the transcript changes, the first to speak wins"),
    "final_only": PolicyFactory(FinalOnlyPolicy, "ask the LLM only on the STT final transcript; feed every chunk"),
}


def make_policy(config: PolicyConfig) -> OraclePolicy:
    """The policy ``config.policy`` names; ValueError naming the registered ids when it is none of them."""
    try:
        factory = POLICIES[config.policy]
    except KeyError:
        raise ValueError(f"unknown oracle policy {config.policy!r}: expected one of {', '.join(POLICIES)}") from None
    return factory(config)
