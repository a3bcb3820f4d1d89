"""The door's scaling rule (``serve --replicas N --max-replicas M``) case by case, then the door carrying it out
with replicas that are plain objects: a replica added when free slots ran short, the newest removed when idle,
never one with a session, a failed start counted and survived."""
from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from kame_core.serve.ingress import Ingress, Scaling
from kame_core.serve.scaling import Autoscaler, Grow, ReplicaLoad, ScalingRule, Shrink


def _rule(**kw: Any) -> ScalingRule:
    return ScalingRule(**{"min_replicas": 1, "max_replicas": 3, "slots_per_replica": 2, "grow_after_s": 10.0,
                          "shrink_after_s": 60.0, **kw})


def _load(index: int, active: int, slots: int = 2, ready: bool = True) -> ReplicaLoad:
    return ReplicaLoad(index, ready, float(slots - active) if ready else 0.0, active)


def test_bad_rules_are_refused_with_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="1 <= the minimum <= the maximum"):
        _rule(min_replicas=3, max_replicas=2)
    with pytest.raises(ValueError, match="1 <= the minimum"):
        _rule(min_replicas=0)
    with pytest.raises(ValueError, match="never full"):
        _rule(slots_per_replica=None)
    with pytest.raises(ValueError, match="at least 1"):
        _rule(slots_per_replica=0)
    with pytest.raises(ValueError, match="headroom 0"):
        _rule(headroom=0)
    for bad in (math.nan, -1.0, math.inf, 1e9):
        with pytest.raises(ValueError, match="grow_after_s"):
            _rule(grow_after_s=bad)
        with pytest.raises(ValueError, match="shrink_after_s"):
            _rule(shrink_after_s=bad)
    assert not _rule(max_replicas=1, slots_per_replica=None).scales  # a fixed number needs no slots


def test_it_grows_only_after_free_slots_ran_short_for_the_whole_wait() -> None:
    scaler = Autoscaler(_rule())
    full = [_load(0, 2)]
    assert scaler.decide(0.0, [_load(0, 1)]) is None  # 1 free < 2 wanted: the wait starts
    assert scaler.decide(5.0, full) is None
    decision = scaler.decide(10.0, full)
    assert isinstance(decision, Grow) and decision.index == 1 and "0 free slot(s) for 10 s" in decision.why


def test_a_burst_shorter_than_the_wait_starts_nothing() -> None:
    scaler = Autoscaler(_rule())
    assert scaler.decide(0.0, [_load(0, 2)]) is None
    assert scaler.decide(9.0, [_load(0, 0)]) is None  # the sessions left: the wait is over
    assert scaler.decide(12.0, [_load(0, 2)]) is None  # short again: a new wait from 12 s
    assert isinstance(scaler.decide(22.0, [_load(0, 2)]), Grow)


def test_it_never_grows_past_the_maximum() -> None:
    scaler = Autoscaler(_rule(max_replicas=2))
    for t in (0.0, 100.0, 1000.0):
        assert scaler.decide(t, [_load(0, 2), _load(1, 2)]) is None


def test_a_replica_that_is_not_ready_offers_no_slots() -> None:
    scaler = Autoscaler(_rule(grow_after_s=0.0))
    decision = scaler.decide(0.0, [_load(0, 0, ready=False)])  # loading or restarting
    assert isinstance(decision, Grow) and decision.index == 1


def test_headroom_is_the_slots_it_keeps_free() -> None:
    scaler = Autoscaler(_rule(slots_per_replica=32, headroom=4, grow_after_s=0.0))
    assert scaler.decide(0.0, [_load(0, 28, slots=32)]) is None  # 4 free: enough
    assert isinstance(scaler.decide(1.0, [_load(0, 29, slots=32)]), Grow)


def test_the_newest_idle_replica_goes_after_the_whole_wait_if_the_others_keep_the_headroom() -> None:
    scaler = Autoscaler(_rule())
    loads = [_load(0, 0), _load(1, 0)]
    assert scaler.decide(0.0, loads) is None
    assert scaler.decide(59.0, loads) is None
    decision = scaler.decide(60.0, loads)
    assert isinstance(decision, Shrink) and decision.index == 1 and "others keep 2 free" in decision.why


def test_a_replica_with_a_session_or_the_last_headroom_is_kept() -> None:
    scaler = Autoscaler(_rule(shrink_after_s=0.0))
    assert scaler.decide(0.0, [_load(0, 0), _load(1, 1)]) is None  # the newest has a session
    assert scaler.decide(1.0, [_load(0, 1), _load(1, 0)]) is None  # without it 1 slot free < 2
    assert scaler.decide(2.0, [_load(0, 0)]) is None  # the minimum
    assert scaler.decide(3.0, [_load(0, 0), _load(1, 0, ready=False)]) is None  # restarting: not judged idle


def test_a_session_on_the_newest_restarts_its_idle_wait() -> None:
    scaler = Autoscaler(_rule())
    idle = [_load(0, 0), _load(1, 0)]
    assert scaler.decide(0.0, idle) is None
    assert scaler.decide(50.0, [_load(0, 0), _load(1, 1)]) is None
    assert scaler.decide(100.0, idle) is None  # idle again only since 100 s
    assert isinstance(scaler.decide(160.0, idle), Shrink)


def test_forget_starts_the_patience_over() -> None:
    scaler = Autoscaler(_rule())
    assert scaler.decide(0.0, [_load(0, 2)]) is None
    scaler.forget()
    assert scaler.decide(10.0, [_load(0, 2)]) is None
    assert isinstance(scaler.decide(20.0, [_load(0, 2)]), Grow)


# ------------------------------------------------------------------------------------------------ the door
class _Replica:
    """A replica link whose load the test sets."""

    def __init__(self, index: int, slots: int = 1) -> None:
        self.index, self.slots, self.active = index, slots, 0

    async def status(self) -> dict[str, Any]:
        return {"ready": True, "free_slots": self.slots - self.active, "active": self.active,
                "address": f"127.0.0.1:{9000 + self.index}"}

    async def metrics(self) -> str:
        return ""

    async def stop(self) -> bool:
        return True


def _door(replicas: list[_Replica], rule: ScalingRule, fail_grow: bool = False) -> tuple[Ingress, list[str]]:
    done: list[str] = []

    async def grow() -> _Replica:
        await asyncio.sleep(0.05)  # the replica loads
        if fail_grow:
            done.append("grow failed")
            raise RuntimeError("no node for it")
        replica = _Replica(len(replicas))
        replicas.append(replica)
        done.append(f"grew {replica.index}")
        return replica

    async def shrink(index: int) -> None:
        replicas.pop(index)
        done.append(f"shrank {index}")

    ingress = Ingress(list(replicas), "replicas-token", scaling=Scaling(rule, grow, shrink, period_s=0.05))
    return ingress, done


async def _until(check: Any, seconds: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_the_door_adds_a_replica_for_sessions_and_removes_it_once_idle() -> None:
    async def scenario() -> tuple[list[str], dict[str, Any], dict[str, Any], str]:
        replicas = [_Replica(0)]
        rule = ScalingRule(1, 2, 1, grow_after_s=0.0, shrink_after_s=0.3)
        ingress, done = _door(replicas, rule)
        ingress.start_scaling()
        assert await ingress._reserve() == (0, "127.0.0.1:9000")  # a session takes the only slot
        await _until(lambda: len(ingress.links) == 2)
        _, while_two = await ingress.readiness()
        assert await ingress._reserve() == (1, "127.0.0.1:9001")  # the next session has a place
        ingress._routed[1] -= 1  # it ended
        await asyncio.sleep(0.6)  # the newest is kept: the first replica is still full, no headroom without it
        assert len(ingress.links) == 2
        ingress._routed[0] -= 1  # the first session ended too: the newest is idle and not needed
        await _until(lambda: len(ingress.links) == 1)
        _, after = await ingress.readiness()
        metrics = (await ingress.metrics_text()).decode()
        await ingress.drain(1.0)
        return done, while_two, after, metrics

    done, while_two, after, metrics = asyncio.run(scenario())
    assert done == ["grew 1", "shrank 1"]
    assert [r["replica"] for r in while_two["replicas"]] == [0, 1]
    assert while_two["scaling"]["max_replicas"] == 2 and while_two["scaling"]["keeps_free"] == 1
    assert [r["replica"] for r in after["replicas"]] == [0] and after["free_slots"] == 1
    assert 'kame_ingress_scaled_total{direction="up"} 1.0' in metrics
    assert 'kame_ingress_scaled_total{direction="down"} 1.0' in metrics
    assert "kame_ingress_replicas 1.0" in metrics


def test_a_replica_with_a_session_through_the_door_is_never_retired() -> None:
    ingress, _ = _door([_Replica(0), _Replica(1)], ScalingRule(1, 2, 1))
    ingress._routed[1] = 1
    assert ingress.retire(1) is None and len(ingress.links) == 2
    ingress._routed[1] = 0
    link = ingress.retire(1)
    assert link is not None and link.index == 1 and [lk.index for lk in ingress.links] == [0]

    async def admit() -> Any:
        return await ingress._reserve()

    assert asyncio.run(admit()) == (0, "127.0.0.1:9000")  # the retired one is not chosen


@pytest.mark.slow  # over 5 s (docs/testing.md): the door's retries waited out on the wall clock
def test_a_replica_that_fails_to_start_is_counted_and_the_door_goes_on() -> None:
    async def scenario() -> tuple[list[str], str, Any]:
        ingress, done = _door([_Replica(0)], ScalingRule(1, 2, 1, grow_after_s=0.0), fail_grow=True)
        ingress.start_scaling()
        assert await ingress._reserve() == (0, "127.0.0.1:9000")
        await _until(lambda: len(done) >= 2)  # it tries again after a failure
        metrics = (await ingress.metrics_text()).decode()
        ingress._routed[0] -= 1
        again = await ingress._reserve()
        await ingress.drain(1.0)
        return done, metrics, again

    done, metrics, again = asyncio.run(scenario())
    assert set(done) == {"grow failed"}
    assert 'kame_ingress_scaled_total{direction="failed"}' in metrics
    assert again == (0, "127.0.0.1:9000")
