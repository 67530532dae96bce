"""The controller's probes, read off a clock the test turns
(cozyrender.controllers.manager): Ready while the API server's last answer
(an error status is an answer) is within --ready-contact, never before the
first; alive while the election loop's calls end, whatever their outcome, and
not alive when a call has hung past the stated bound. The live behaviour is
tests/test_controller_probes_live.py's."""

from __future__ import annotations

import threading

import pytest
from lightkube.core.exceptions import ApiError
from lightkube.models import meta_v1

from cozyrender.controllers.manager import Manager


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Server:
    """What the election loop's client meets: answers, error statuses, a
    refused connection, or a call that never returns until released."""

    def __init__(self) -> None:
        self.outcome: object = {"spec": {}}
        self.release = threading.Event()

    def get(self, *args, **kwargs):
        if self.outcome == "hang":
            self.release.wait(10)
            return {}
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


@pytest.fixture
def parts():
    clock, server = Clock(), Server()
    manager = Manager(lambda: server, {"namespace": "ns", "name": "lease", "identity": "me"}, {},
                      ready_contact=30, stuck_after=90, clock=clock)
    return manager, clock, server


def test_not_ready_before_the_first_answer_and_ready_after_it(parts):
    manager, clock, server = parts
    assert manager.readiness() == (False, "no answer from the API server yet")
    manager.contact.get("lease")
    assert manager.readiness() == (True, "ok")


def test_an_error_status_is_an_answer_a_refused_connection_is_not(parts):
    manager, clock, server = parts
    server.outcome = ApiError(status=meta_v1.Status(code=409, message="conflict"))
    with pytest.raises(ApiError):
        manager.contact.get("lease")
    assert manager.ready()
    clock.now += 31
    server.outcome = ConnectionRefusedError(111, "Connection refused")
    with pytest.raises(OSError):
        manager.contact.get("lease")
    ready, why = manager.readiness()
    assert not ready and why == "the API server's last answer is 31 s old (the bound is 30 s): it cannot be reached"
    assert manager.liveness() == (True, "ok")  # the failed call ended: the loop goes on


def test_ready_exactly_up_to_the_bound(parts):
    manager, clock, server = parts
    manager.contact.get("lease")
    clock.now += 30
    assert manager.ready()
    clock.now += 0.5
    assert not manager.ready()


def test_a_call_hung_past_the_bound_is_not_alive(parts):
    manager, clock, server = parts
    manager.contact.get("lease")
    server.outcome = "hang"
    caller = threading.Thread(target=manager.contact.get, args=("lease",))
    caller.start()
    try:
        clock.now += 90
        assert manager.liveness() == (True, "ok")
        clock.now += 1
        assert manager.liveness() == (False, "the leader election loop is stuck: no API call has ended for 91 s")
    finally:
        server.release.set()
        caller.join()
    assert manager.liveness() == (True, "ok")  # the call ended: alive again


def test_a_dead_election_loop_is_not_alive(parts):
    manager, clock, server = parts
    manager._elector_thread = threading.Thread(target=lambda: None)
    manager._elector_thread.start()
    manager._elector_thread.join()
    assert manager.liveness() == (False, "the leader election loop has stopped")
