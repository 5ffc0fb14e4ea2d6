"""The suite's leftover-task check (tests/task_leaks.py) fails an async test that leaves a task
running, and only such a test: tasks awaited, cancelled and awaited, or cleaned up by a fixture's
teardown pass, and so do the tasks of pytest-asyncio itself and sync tests. Each case runs in a
pytest of its own (pytester)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
TESTS = Path(__file__).resolve().parents[1]

HEADER = """
import asyncio
import contextlib

import pytest
import pytest_asyncio
"""


def run(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    pytester.makepyfile(test_case=HEADER + body)
    options = ["-o", f"pythonpath={TESTS}", "-o", "asyncio_mode=auto", "-p", "no:cacheprovider"]
    options += ["-o", "asyncio_default_fixture_loop_scope=function"]
    return pytester.runpytest_subprocess("-p", "task_leaks", *options)


def test_a_task_left_running_fails_the_test_and_is_named(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
async def test_leaks() -> None:
    asyncio.create_task(asyncio.Event().wait(), name="forgotten-watcher")
""",
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*left 1 asyncio task(s) running*", "*forgotten-watcher*"])


def test_a_task_a_fixture_leaves_after_its_teardown_fails_the_test(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
@pytest_asyncio.fixture
async def background():
    task = asyncio.create_task(asyncio.Event().wait(), name="fixture-task")
    yield task


async def test_uses_it(background: asyncio.Task[None]) -> None:
    assert not background.done()
""",
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*fixture-task*"])


def test_tasks_that_are_awaited_or_cleaned_up_pass(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
@pytest_asyncio.fixture
async def background():
    task = asyncio.create_task(asyncio.Event().wait())
    yield task
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_fixture_cleans_up(background: asyncio.Task[None]) -> None:
    assert not background.done()


async def test_awaited() -> None:
    await asyncio.create_task(asyncio.sleep(0))


async def test_cancelled_without_await_finishes_in_the_loop() -> None:
    asyncio.create_task(asyncio.Event().wait()).cancel()


def test_sync() -> None:
    assert asyncio.run(asyncio.sleep(0, result=1)) == 1
""",
    )
    result.assert_outcomes(passed=4)
