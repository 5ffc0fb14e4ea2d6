"""kubesim.procrt.probes: probe specs parsed as the kubelet reads them, and the per-container
prober's state machine (startup gating, initial delay, period, thresholds, errors, stop) on a fake
clock."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.expansion import expand
from kubesim.procrt.prober import run_probe
from kubesim.procrt.probes import (
    BrokenAction,
    ExecAction,
    GRPCAction,
    HTTPGetAction,
    Outcome,
    ProbeEvent,
    ProbeResult,
    ProbeSpec,
    ProbeType,
    TCPSocketAction,
    container_probes,
    probe_event,
)
from kubesim.procrt.probeworker import ContainerProber

S, W, F, E = Outcome.SUCCESS, Outcome.WARNING, Outcome.FAILURE, Outcome.ERROR
STARTUP, LIVENESS, READINESS = ProbeType.STARTUP, ProbeType.LIVENESS, ProbeType.READINESS

CONTAINER: dict[str, Any] = {
    "name": "worker",
    "ports": [{"name": "ssh", "containerPort": 2222}, {"name": "http", "containerPort": 8080}],
    "env": [
        {"name": "PORT", "value": "2222"},
        {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    ],
}


@pytest.mark.parametrize(
    ("probe", "expected"),
    [
        pytest.param({"tcpSocket": {"port": 22}}, ProbeSpec(TCPSocketAction(22)), id="defaults"),
        pytest.param(
            {
                "tcpSocket": {"port": 22, "host": "10.244.0.9"},
                "initialDelaySeconds": 5,
                "periodSeconds": 2,
                "timeoutSeconds": 3,
                "successThreshold": 2,
                "failureThreshold": 7,
                "terminationGracePeriodSeconds": 4,
            },
            ProbeSpec(TCPSocketAction(22, "10.244.0.9"), 5, 2, 3, 2, 7, 4),
            id="everything-set",
        ),
        pytest.param(
            {
                "tcpSocket": {"port": 22},
                "periodSeconds": 0,
                "timeoutSeconds": 0,
                "failureThreshold": 0,
            },
            ProbeSpec(TCPSocketAction(22)),
            id="zero-means-default",
        ),
        pytest.param(
            {"tcpSocket": {"port": "ssh"}}, ProbeSpec(TCPSocketAction(2222)), id="named-port"
        ),
        pytest.param(
            {"tcpSocket": {"port": "2022"}}, ProbeSpec(TCPSocketAction(2022)), id="number-as-string"
        ),
        pytest.param(
            {"tcpSocket": {"port": "sshd"}},
            ProbeSpec(BrokenAction('strconv.Atoi: parsing "sshd": invalid syntax')),
            id="unknown-port-name",
        ),
        pytest.param(
            {"tcpSocket": {"port": 70000}},
            ProbeSpec(BrokenAction("invalid port number: 70000")),
            id="port-out-of-range",
        ),
        pytest.param(
            {"httpGet": {"port": "http"}},
            ProbeSpec(HTTPGetAction(8080, "/", "", "HTTP", ())),
            id="http-defaults",
        ),
        pytest.param(
            {
                "httpGet": {
                    "port": 8443,
                    "path": "/healthz?deep=1",
                    "host": "10.244.0.7",
                    "scheme": "HTTPS",
                    "httpHeaders": [
                        {"name": "x-probe", "value": "1"},
                        {"name": "Host", "value": "svc"},
                    ],
                }
            },
            ProbeSpec(
                HTTPGetAction(
                    8443,
                    "/healthz?deep=1",
                    "10.244.0.7",
                    "HTTPS",
                    (("x-probe", "1"), ("Host", "svc")),
                )
            ),
            id="http-everything",
        ),
        pytest.param(
            {"httpGet": {"port": "metrics"}},
            ProbeSpec(BrokenAction('strconv.Atoi: parsing "metrics": invalid syntax')),
            id="http-unknown-port-name",
        ),
        pytest.param(
            {
                "exec": {
                    "command": [
                        "sh",
                        "-c",
                        "nc -z localhost $(PORT) && echo $$(PORT) $(SECRET) $(NOPE)",
                    ]
                }
            },
            ProbeSpec(ExecAction(("sh", "-c", "nc -z localhost 2222 && echo $(PORT)  $(NOPE)"))),
            id="exec-expands-static-env",
        ),
        pytest.param(
            {"grpc": {"port": 9090, "service": "health"}},
            ProbeSpec(GRPCAction(9090, "health")),
            id="grpc",
        ),
        pytest.param(
            {"periodSeconds": 3},
            ProbeSpec(BrokenAction("missing probe handler for worker"), period_seconds=3),
            id="no-handler",
        ),
    ],
)
def test_probe_specs_parse_as_the_kubelet_reads_them(
    probe: dict[str, Any], expected: ProbeSpec
) -> None:
    assert ProbeSpec.from_k8s(probe, CONTAINER) == expected


def test_container_probes_finds_each_declared_probe() -> None:
    container = {
        **CONTAINER,
        "readinessProbe": {"tcpSocket": {"port": "ssh"}},
        "startupProbe": {"exec": {"command": ["true"]}},
    }
    assert container_probes(container) == {
        STARTUP: ProbeSpec(ExecAction(("true",))),
        READINESS: ProbeSpec(TCPSocketAction(2222)),
    }


@pytest.mark.parametrize(
    ("arg", "expanded"),
    [
        ("$(PORT)", "2222"),
        ("$$(PORT)", "$(PORT)"),
        ("$$$(PORT)", "$2222"),
        ("$(MISSING)", "$(MISSING)"),
        ("$(PORT", "$(PORT"),
        ("a$b", "a$b"),
        ("end$", "end$"),
        ("$(EMPTY)x", "x"),
    ],
)
def test_static_expansion_follows_kubernetes(arg: str, expanded: str) -> None:
    assert expand(arg, {"PORT": "2222", "EMPTY": ""}) == expanded


async def test_an_unknown_port_name_is_the_kubelets_probe_error() -> None:
    spec = ProbeSpec.from_k8s({"tcpSocket": {"port": "sshd"}}, CONTAINER)
    result = await run_probe(spec, pod_ip="10.244.0.5", network=_NoNetwork())
    assert result == ProbeResult(E, 'strconv.Atoi: parsing "sshd": invalid syntax')
    assert probe_event(READINESS, result) == ProbeEvent(
        "Unhealthy",
        'Readiness probe errored and resulted in unknown state: strconv.Atoi: parsing "sshd": '
        "invalid syntax",
    )


async def test_grpc_probes_fail_saying_they_are_unsupported() -> None:
    result = await run_probe(ProbeSpec(GRPCAction(9090)), pod_ip="10.244.0.5", network=_NoNetwork())
    assert result.outcome is F
    assert "grpc probes are not supported" in result.output


def test_event_texts_are_the_kubelets() -> None:
    refused = ProbeResult(F, "dial tcp 10.244.0.5:22: connect: connection refused")
    assert probe_event(READINESS, refused) == ProbeEvent(
        "Unhealthy", "Readiness probe failed: dial tcp 10.244.0.5:22: connect: connection refused"
    )
    assert probe_event(
        LIVENESS, ProbeResult(W, "Probe terminated redirects, Response body: ")
    ) == ProbeEvent(
        "ProbeWarning", "Liveness probe warning: Probe terminated redirects, Response body: "
    )
    assert probe_event(STARTUP, ProbeResult(S, "ok")) is None


class _NoNetwork:
    async def open_connection(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        raise AssertionError(f"no connection expected, got {host}:{port}")


# The prober on a fake clock.


class FakeClock:
    """Simulated seconds that pass only when a test advances them.

    `advance` wakes the sleepers in due order and, after each, waits until every probe loop of the
    prober is asleep again or has ended, so a test sees the state the prober reached at each moment.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None], asyncio.Task[Any] | None]] = []
        self._seq = 0
        self._arrived = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self._seq += 1
        entry = (
            self.now + seconds,
            self._seq,
            asyncio.get_running_loop().create_future(),
            asyncio.current_task(),
        )
        self._sleepers.append(entry)
        self._arrived.set()
        try:
            await entry[2]
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    async def settle(self, prober: ContainerProber) -> None:
        while True:
            parked = {entry[3] for entry in self._sleepers if not entry[2].done()}
            busy = [task for task in prober.tasks if task not in parked]
            if not busy:
                return
            self._arrived.clear()
            arrived = asyncio.ensure_future(self._arrived.wait())
            try:
                await asyncio.wait([arrived, *busy], return_when=asyncio.FIRST_COMPLETED)
            finally:
                arrived.cancel()

    async def advance(self, prober: ContainerProber, seconds: float) -> None:
        target = self.now + seconds
        await self.settle(prober)
        while due := [e for e in self._sleepers if e[0] <= target and not e[2].done()]:
            entry = min(due, key=lambda e: (e[0], e[1]))
            self._sleepers.remove(entry)
            self.now = entry[0]
            entry[2].set_result(None)
            await self.settle(prober)
        self.now = target


class Script:
    """Attempts that answer from a script per probe type (then `then`), recording when they ran."""

    def __init__(self, clock: FakeClock, then: Outcome = S, **scripts: Sequence[Outcome]) -> None:
        self.clock = clock
        self.then = then
        self.scripts = {
            ProbeType[kind.upper()]: list(outcomes) for kind, outcomes in scripts.items()
        }
        self.calls: list[tuple[float, ProbeType]] = []

    async def __call__(self, kind: ProbeType, spec: ProbeSpec) -> ProbeResult:
        self.calls.append((self.clock.now, kind))
        script = self.scripts.get(kind)
        outcome = script.pop(0) if script else self.then
        return ProbeResult(outcome, f"{kind.value.lower()} {outcome.value}")

    def times(self, kind: ProbeType) -> list[float]:
        return [t for t, k in self.calls if k is kind]


class Seen:
    def __init__(self) -> None:
        self.started = 0
        self.ready: list[bool] = []
        self.liveness: list[str] = []
        self.startup: list[str] = []
        self.events: list[ProbeEvent] = []


def prober_for(
    clock: FakeClock, attempt: Script, seen: Seen, name: str = "worker", **probes: ProbeSpec
) -> ContainerProber:
    def started() -> None:
        seen.started += 1

    return ContainerProber(
        name,
        {ProbeType[kind.upper()]: spec for kind, spec in probes.items()},
        attempt=attempt,
        sleep=clock.sleep,
        on_started=started,
        on_ready=seen.ready.append,
        on_liveness_failure=seen.liveness.append,
        on_startup_failure=seen.startup.append,
        on_event=seen.events.append,
    )


TCP = TCPSocketAction(22)


async def test_no_probes_means_started_and_ready_at_once() -> None:
    clock, seen = FakeClock(), Seen()
    prober = prober_for(clock, Script(clock), seen)
    prober.launch()
    assert (seen.started, seen.ready, prober.ready, prober.tasks) == (1, [True], True, frozenset())


async def test_readiness_starts_false_and_waits_for_the_initial_delay_and_threshold() -> None:
    clock, seen = FakeClock(), Seen()
    attempt = Script(clock)
    prober = prober_for(
        clock,
        attempt,
        seen,
        readiness=ProbeSpec(TCP, initial_delay_seconds=5, period_seconds=3, success_threshold=2),
    )
    prober.launch()
    await clock.advance(prober, 4.9)
    assert (seen.started, attempt.calls, seen.ready) == (1, [], [])
    await clock.advance(prober, 0.1)
    assert (attempt.times(READINESS), seen.ready) == ([5.0], [])
    await clock.advance(prober, 3)
    assert (attempt.times(READINESS), seen.ready) == ([5.0, 8.0], [True])
    await clock.advance(prober, 30)
    assert attempt.times(READINESS) == [5.0 + 3 * i for i in range(12)]
    assert seen.ready == [True]  # only changes are reported
    prober.stop()


async def test_readiness_flaps_with_the_thresholds() -> None:
    clock, seen = FakeClock(), Seen()
    attempt = Script(clock, readiness=[S, F, F, S, F, F, F, S, S], then=S)
    prober = prober_for(
        clock, attempt, seen, readiness=ProbeSpec(TCP, period_seconds=1, failure_threshold=2)
    )
    prober.launch()
    states: list[bool] = []
    for _ in range(9):
        await clock.advance(prober, 1)
        states.append(prober.ready)
    # attempts at 0..9: S F F S F F F S S S
    assert seen.ready == [True, False, True, False, True]
    assert states == [True, False, True, True, False, False, True, True, True]
    unhealthy = [e.message for e in seen.events]
    assert unhealthy == ["Readiness probe failed: readiness failure"] * 5
    prober.stop()


async def test_the_startup_probe_gates_liveness_and_readiness() -> None:
    clock, seen = FakeClock(), Seen()
    attempt = Script(clock, startup=[F, F, F, F, S])
    prober = prober_for(
        clock,
        attempt,
        seen,
        startup=ProbeSpec(TCP, period_seconds=5, failure_threshold=10),
        liveness=ProbeSpec(TCP, initial_delay_seconds=12, period_seconds=10),
        readiness=ProbeSpec(TCP, initial_delay_seconds=30, period_seconds=10),
    )
    prober.launch()
    await clock.advance(prober, 19)
    assert (seen.started, seen.ready, {k for _, k in attempt.calls}) == (0, [], {STARTUP})
    await clock.advance(prober, 1)
    # Startup succeeded at 20 s: liveness's 12 s initial delay has passed, readiness's 30 s has not.
    assert (
        seen.started,
        attempt.times(STARTUP),
        attempt.times(LIVENESS),
        attempt.times(READINESS),
    ) == (
        1,
        [0.0, 5.0, 10.0, 15.0, 20.0],
        [20.0],
        [],
    )
    await clock.advance(prober, 10)
    assert (attempt.times(LIVENESS), attempt.times(READINESS), seen.ready) == (
        [20.0, 30.0],
        [30.0],
        [True],
    )
    await clock.advance(prober, 100)
    assert attempt.times(STARTUP) == [0.0, 5.0, 10.0, 15.0, 20.0]  # never again for this container
    prober.stop()


async def test_no_readiness_probe_means_ready_when_the_startup_probe_passes() -> None:
    clock, seen = FakeClock(), Seen()
    prober = prober_for(
        clock, Script(clock, startup=[F, S]), seen, startup=ProbeSpec(TCP, period_seconds=2)
    )
    prober.launch()
    await clock.advance(prober, 1)
    assert (seen.started, seen.ready) == (0, [])
    await clock.advance(prober, 1)
    assert (seen.started, seen.ready, prober.tasks) == (1, [True], frozenset())


async def test_startup_failures_restart_the_container_and_nothing_else_runs() -> None:
    clock, seen = FakeClock(), Seen()
    attempt = Script(clock, then=F)
    prober = prober_for(
        clock,
        attempt,
        seen,
        name="ssh",
        startup=ProbeSpec(TCP, period_seconds=10, failure_threshold=3),
        liveness=ProbeSpec(TCP),
        readiness=ProbeSpec(TCP),
    )
    prober.launch()
    await clock.advance(prober, 1000)
    assert attempt.calls == [(0.0, STARTUP), (10.0, STARTUP), (20.0, STARTUP)]
    assert seen.startup == ["Container ssh failed startup probe, will be restarted"]
    assert (seen.started, seen.ready, seen.liveness, prober.tasks) == (0, [], [], frozenset())


async def test_startup_failures_go_to_the_liveness_callback_by_default() -> None:
    clock, killed = FakeClock(), list[str]()
    prober = ContainerProber(
        "c",
        {STARTUP: ProbeSpec(TCP, failure_threshold=1)},
        attempt=Script(clock, then=F),
        sleep=clock.sleep,
        on_liveness_failure=killed.append,
    )
    prober.launch()
    await clock.advance(prober, 0)
    assert killed == ["Container c failed startup probe, will be restarted"]


async def test_liveness_failures_call_back_once_and_readiness_goes_on() -> None:
    clock, seen = FakeClock(), Seen()
    attempt = Script(clock, liveness=[F, F, S, F, F, F, F], readiness=[S] * 20, then=F)
    prober = prober_for(
        clock,
        attempt,
        seen,
        liveness=ProbeSpec(TCP, period_seconds=10, failure_threshold=3),
        readiness=ProbeSpec(TCP, period_seconds=10),
    )
    prober.launch()
    await clock.advance(prober, 40)
    assert seen.liveness == []
    await clock.advance(prober, 10)
    assert seen.liveness == ["Container worker failed liveness probe, will be restarted"]
    await clock.advance(prober, 100)
    assert seen.liveness == ["Container worker failed liveness probe, will be restarted"]
    assert attempt.times(LIVENESS) == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    assert attempt.times(READINESS) == [10.0 * i for i in range(16)]
    assert seen.ready == [True]
    assert [e.message for e in seen.events].count("Liveness probe failed: liveness failure") == 5
    prober.stop()


async def test_errors_are_retried_recorded_and_thrown_away() -> None:
    clock, seen = FakeClock(), Seen()
    attempt = Script(clock, readiness=[E, E, S, E, E, E, F], then=S)
    prober = prober_for(
        clock, attempt, seen, readiness=ProbeSpec(TCP, period_seconds=10, failure_threshold=1)
    )
    prober.launch()
    await clock.advance(prober, 0)
    assert (attempt.times(READINESS), seen.ready, seen.events) == ([0.0] * 3, [True], [])
    await clock.advance(prober, 10)
    # Three errors in a row: one event, and readiness stays as it was.
    assert (attempt.times(READINESS), seen.ready) == ([0.0] * 3 + [10.0] * 3, [True])
    assert seen.events == [
        ProbeEvent(
            "Unhealthy", "Readiness probe errored and resulted in unknown state: readiness error"
        )
    ]
    await clock.advance(prober, 10)
    assert seen.ready == [True, False]
    prober.stop()


async def test_a_warning_is_a_success_with_its_event() -> None:
    clock, seen = FakeClock(), Seen()
    prober = prober_for(clock, Script(clock, readiness=[W]), seen, readiness=ProbeSpec(TCP))
    prober.launch()
    await clock.advance(prober, 0)
    assert (seen.ready, seen.events) == (
        [True],
        [ProbeEvent("ProbeWarning", "Readiness probe warning: readiness warning")],
    )
    prober.stop()


async def test_terminating_stops_startup_and_liveness_but_not_readiness() -> None:
    clock, seen = FakeClock(), Seen()
    attempt = Script(clock, then=S)
    prober = prober_for(
        clock, attempt, seen, liveness=ProbeSpec(TCP), readiness=ProbeSpec(TCP, failure_threshold=1)
    )
    prober.launch()
    await clock.advance(prober, 10)
    prober.terminating()
    attempt.then = F
    await clock.advance(prober, 100)
    assert attempt.times(LIVENESS) == [0.0, 10.0]
    assert (seen.liveness, seen.ready) == ([], [True, False])
    prober.stop()


async def test_stop_cancels_an_attempt_in_flight_and_silences_callbacks() -> None:
    clock, seen = FakeClock(), Seen()
    entered, cancelled, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def hanging(kind: ProbeType, spec: ProbeSpec) -> ProbeResult:
        entered.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return ProbeResult(S)

    prober = ContainerProber(
        "c",
        {READINESS: ProbeSpec(TCP), LIVENESS: ProbeSpec(TCP, failure_threshold=1)},
        attempt=hanging,
        sleep=clock.sleep,
        on_ready=seen.ready.append,
        on_event=seen.events.append,
    )
    prober.launch()
    await entered.wait()
    prober.stop()
    await prober.wait_stopped()
    assert cancelled.is_set()
    assert (prober.tasks, seen.ready, seen.events, prober.ready) == (frozenset(), [], [], False)


async def test_stop_from_a_callback_ends_probing() -> None:
    clock, seen = FakeClock(), Seen()
    attempt = Script(clock, then=F)
    prober: ContainerProber

    def kill(message: str) -> None:
        seen.liveness.append(message)
        prober.stop()

    prober = ContainerProber(
        "c",
        {
            LIVENESS: ProbeSpec(TCP, failure_threshold=1),
            READINESS: ProbeSpec(TCP, failure_threshold=1),
        },
        attempt=attempt,
        sleep=clock.sleep,
        on_liveness_failure=kill,
        on_event=seen.events.append,
    )
    prober.launch()
    await clock.advance(prober, 100)
    await prober.wait_stopped()
    assert seen.liveness == ["Container c failed liveness probe, will be restarted"]
    assert attempt.times(READINESS) in ([], [0.0])  # the other loop may have had its first turn
    assert prober.tasks == frozenset()


async def test_a_raising_callback_or_attempt_does_not_end_probing() -> None:
    clock = FakeClock()
    calls = 0

    async def flaky(kind: ProbeType, spec: ProbeSpec) -> ProbeResult:
        nonlocal calls
        calls += 1
        if calls <= 3:
            raise RuntimeError("bug")
        return ProbeResult(S)

    def broken(ready: bool) -> None:
        raise RuntimeError("callback bug")

    prober = ContainerProber(
        "c", {READINESS: ProbeSpec(TCP)}, attempt=flaky, sleep=clock.sleep, on_ready=broken
    )
    prober.launch()
    await clock.advance(prober, 10)
    assert (calls, prober.ready, len(prober.tasks)) == (4, True, 1)
    prober.stop()


async def test_launching_twice_is_refused() -> None:
    clock = FakeClock()
    prober = ContainerProber("c", {}, attempt=Script(clock), sleep=clock.sleep)
    prober.launch()
    with pytest.raises(RuntimeError):
        prober.launch()


# Properties: the prober against a simple model of the thresholds.

OUTCOMES = st.lists(st.sampled_from([S, W, F, E]), min_size=1, max_size=40)


def _periods(outcomes: list[Outcome]) -> list[tuple[int, Outcome]]:
    """(attempts used, result) per period: an error is tried again, three attempts at most. Past the
    script, attempts succeed (the `Script`'s `then`)."""
    periods: list[tuple[int, Outcome]] = []
    i = 0
    while i < len(outcomes):
        tries = 0
        while True:
            result = outcomes[i] if i < len(outcomes) else S
            i += 1
            tries += 1
            if result is not E or tries == 3:
                break
        periods.append((tries, result))
    return periods


def _model_state(results: list[Outcome], success: int, failure: int) -> list[bool]:
    """The state after each period: the last `success` counted results all ok -> ready, the last
    `failure` all failed -> not ready; errors do not count."""
    counted: list[bool] = []
    state = False
    states = []
    for result in results:
        if result is not E:
            counted.append(result is not F)
            if len(counted) >= success and all(counted[-success:]):
                state = True
            if len(counted) >= failure and not any(counted[-failure:]):
                state = False
        states.append(state)
    return states


def _drive(
    probes: dict[ProbeType, ProbeSpec], outcomes: list[Outcome], until: float
) -> tuple[Script, Seen, bool]:
    async def scenario() -> tuple[Script, Seen, bool]:
        clock, seen = FakeClock(), Seen()
        kind = next(iter(probes))
        attempt = Script(clock, then=S, **{kind.name.lower(): outcomes})
        prober = ContainerProber(
            "c",
            probes,
            attempt=attempt,
            sleep=clock.sleep,
            on_ready=seen.ready.append,
            on_liveness_failure=seen.liveness.append,
            on_event=seen.events.append,
        )
        prober.launch()
        await clock.advance(prober, until)
        ready = prober.ready
        prober.stop()
        await prober.wait_stopped()
        return attempt, seen, ready

    return asyncio.run(scenario())


@settings(max_examples=150, deadline=None)
@given(
    outcomes=OUTCOMES,
    success=st.integers(1, 4),
    failure=st.integers(1, 4),
    delay=st.integers(0, 20),
    period=st.integers(1, 15),
)
def test_readiness_follows_the_threshold_model(
    outcomes: list[Outcome], success: int, failure: int, delay: int, period: int
) -> None:
    periods = _periods(outcomes)
    spec = ProbeSpec(TCP, delay, period, 1, success, failure)
    attempt, seen, ready = _drive({READINESS: spec}, outcomes, delay + (len(periods) - 1) * period)
    expected_times = [
        float(delay + n * period) for n, (tries, _) in enumerate(periods) for _ in range(tries)
    ]
    assert attempt.times(READINESS) == expected_times
    states = _model_state([result for _, result in periods], success, failure)
    changes = [s for i, s in enumerate(states) if s != (states[i - 1] if i else False)]
    assert seen.ready == changes
    assert ready == states[-1]
    assert [e.reason for e in seen.events] == [
        "ProbeWarning" if result is W else "Unhealthy" for _, result in periods if result is not S
    ]


@settings(max_examples=150, deadline=None)
@given(outcomes=OUTCOMES, failure=st.integers(1, 4), period=st.integers(1, 15))
def test_liveness_kills_once_at_the_threshold_and_stops(
    outcomes: list[Outcome], failure: int, period: int
) -> None:
    periods = _periods(outcomes)
    spec = ProbeSpec(TCP, 0, period, 1, 1, failure)
    attempt, seen, _ = _drive({LIVENESS: spec}, outcomes, len(periods) * period + 5 * period)
    run, kill_at = 0, None
    for n, (_, result) in enumerate(periods):
        run = run + 1 if result is F else 0 if result is not E else run
        if run >= failure:
            kill_at = n
            break
    if kill_at is None:
        assert seen.liveness == []
    else:
        assert seen.liveness == ["Container c failed liveness probe, will be restarted"]
        used = sum(tries for tries, _ in periods[: kill_at + 1])
        assert len(attempt.times(LIVENESS)) == used
