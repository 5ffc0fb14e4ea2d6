"""bench/compare.py's pure parts: the order the arms run in, the arms' names, the `--` between its
flags and bench/report.py's, and the summary's medians and change."""

from __future__ import annotations

import argparse
from typing import Any

import compare
import pytest
import scale


@pytest.mark.parametrize(
    ("rounds", "expected"),
    [
        (1, [["a", "b"]]),
        (2, [["a", "b"], ["b", "a"]]),
        (3, [["a", "b"], ["b", "a"], ["a", "b"]]),
    ],
)
def test_the_arms_take_turns_reversed_every_other_round(
    rounds: int, expected: list[list[str]]
) -> None:
    assert scale.turns(["a", "b"], rounds) == expected


def test_every_arm_runs_first_as_often_as_the_other_over_even_rounds() -> None:
    firsts = [order[0] for order in scale.turns(["a", "b", "c"], 6)]
    assert firsts.count("a") == firsts.count("c") == 3
    assert all(sorted(order) == ["a", "b", "c"] for order in scale.turns(["a", "b", "c"], 6))


@pytest.mark.parametrize(
    ("base", "other", "expected"),
    [
        ("655a4b8", None, ["655a4b8", compare.HERE]),
        ("HEAD~1", "HEAD", ["HEAD~1", "HEAD"]),
        ("HEAD", "HEAD", ["HEAD", "HEAD (again)"]),
    ],
)
def test_arms_are_named_by_their_commits_and_never_collide(
    base: str, other: str | None, expected: list[str]
) -> None:
    assert compare.arms(base, other) == expected


def test_flags_after_the_double_dash_are_the_reports() -> None:
    args, fan_args = compare.parse_args(
        ["HEAD~1", "--rounds", "4", "--fan", "both", "--", "--light-jobs", "50", "--workers", "4"]
    )
    assert (args.base, args.other, args.rounds, args.fan) == ("HEAD~1", None, 4, "both")
    assert (fan_args.light_jobs, fan_args.workers) == (50, 4)
    unsat = scale.unsaturated(fan_args)
    assert (unsat.jobs, unsat.pod_seconds) == (50, fan_args.light_pod_seconds)


def test_without_a_double_dash_the_fan_ins_are_the_reports_defaults() -> None:
    args, fan_args = compare.parse_args(["a1b2c3", "d4e5f6"])
    assert (args.base, args.other, args.rounds, args.fan) == ("a1b2c3", "d4e5f6", 6, "unsaturated")
    assert (fan_args.jobs, fan_args.light_jobs, fan_args.workers) == (1000, 200, 8)


def test_zero_rounds_is_refused() -> None:
    with pytest.raises(SystemExit):
        compare.parse_args(["HEAD", "--rounds", "0"])


def run(cost: float, syncs: float = 4.0, idle: float = 1.0) -> dict[str, Any]:
    return {
        "operator_cpu_ms_per_job": cost,
        "syncs_running": {"per_job": syncs, "without_writes_per_job": idle},
    }


def test_the_summary_gives_each_arms_medians_and_the_change() -> None:
    args = argparse.Namespace(jobs=200, workers=8, pod_seconds=0.5)
    lines = compare.summary(
        "unsaturated",
        args,
        {
            "old": [run(10.0, 5.0, 2.0), run(12.0, 4.0, 1.0), run(11.0, 4.5, 1.5)],
            "new": [run(9.0), run(8.0), run(30.0)],
        },
    )
    assert lines == [
        "unsaturated: 200 x 8, pods in 0.5 s",
        "  old  11.00 ms per job (runs: 10.00, 12.00, 11.00); 4.50 syncs per job, "
        "1.50 writing nothing",
        "  new  9.00 ms per job (runs: 9.00, 8.00, 30.00); 4.00 syncs per job, "
        "1.00 writing nothing",
        "  new against old: -18.2 %",
    ]
