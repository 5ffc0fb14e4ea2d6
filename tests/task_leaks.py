"""pytest plugin (`pytest_plugins = ["task_leaks"]`): an async test fails if it leaves asyncio tasks
running.

A task a test (or one of its fixtures) started and nobody awaited goes on after the test: it may
write to a cluster the next test does not own, hold a port, or fail later with nobody to see it.
pytest-asyncio closes each test's event loop with `asyncio.Runner`, which cancels such tasks
silently, so without this check a leak is invisible.

The check runs in the test's own event loop after every other fixture of the test is torn down (its
fixture is the first the test sets up, so the last torn down) and before the loop closes. It counts
the tasks created since the test's setup began that are still pending then; the tasks of
pytest-asyncio's own fixture steps are finished by then, and tasks already cancelled get the few
loop iterations they need to finish. Leaks are named, with where each is suspended, then cancelled
and awaited so that the loop closes cleanly.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

SETTLE_ITERATIONS = 20
"""Loop iterations given to tasks that are finishing (a cancellation being delivered, a done
callback)."""
REAP_SECONDS = 5.0
"""How long the leaked tasks get to honour their cancellation once the leak is reported."""


def describe(task: asyncio.Task[object]) -> str:
    stack = io.StringIO()
    task.print_stack(limit=3, file=stack)
    where = "\n    ".join(line for line in stack.getvalue().splitlines()[1:] if line.strip())
    return f"{task.get_name()}: {task.get_coro()!r}\n    {where}"


async def _settle(tasks: set[asyncio.Task[object]]) -> set[asyncio.Task[object]]:
    """The tasks of `tasks` still pending after the loop has run a few times."""
    for _ in range(SETTLE_ITERATIONS):
        if all(t.done() for t in tasks):
            break
        await asyncio.sleep(0)  # one loop iteration, not a wait for time
    return {t for t in tasks if not t.done()}


@pytest_asyncio.fixture
async def _leftover_task_check() -> AsyncIterator[None]:
    before = asyncio.all_tasks()
    yield
    current = asyncio.current_task()
    started = {t for t in asyncio.all_tasks() if t not in before and t is not current}
    leaked = await _settle(started)
    if not leaked:
        return
    report = "\n  ".join(sorted(describe(t) for t in leaked))
    for task in leaked:
        task.cancel()
    await asyncio.wait(leaked, timeout=REAP_SECONDS)
    pytest.fail(
        f"the test left {len(leaked)} asyncio task(s) running (cancel and await what a test "
        "starts):\n"
        f"  {report}",
        pytrace=False,
    )


@pytest.fixture(autouse=True)
def _no_leftover_tasks(request: pytest.FixtureRequest) -> None:
    """Autouse, so it is set up before the test's other fixtures and torn down after them all."""
    if pytest_asyncio.is_async_test(request.node):
        request.getfixturevalue("_leftover_task_check")
