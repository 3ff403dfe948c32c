"""``python -m bench.drift``: real API drift, corrected by the self-correcting loop, measured.

Every case (``bench/drift/cases/*.yaml``) runs through ``librarian workflow run`` twice in one fresh
data directory, offline (no LLM), with no question asked of a user:

1. the first run meets the drift; the loop detects the version in the task's environment, indexes the
   tool's help or the package's API on demand, researches, corrects (in a chain when the correction
   meets a second drift) and learns the fix once the task's check passes;
2. the second run meets the same drift and should be fixed from the learned fix, with no research.

Reported per case and in total: fixed on the first run (the case's own check on the real result, not
the exit code), fixed again on the second run with zero research calls, the correction time (the
failure recorded to the corrected retry scheduled, documentation indexing left out; with and without
the wait for the embedding model, which each new ``librarian workflow run`` process loads once), the
indexing time, and the strategy that won. The totals are given over the cases whose fix is an edit
of the command or code (``scope: edit``) and over all of them (``scope: rewrite`` cases need the
task redone another way, which only an LLM or a person can find).

    .venv/bin/python -m bench.drift                     # every case
    .venv/bin/python -m bench.drift --verify            # check the cases themselves (old/new/fixed)
    .venv/bin/python -m bench.drift --case ruff-bare-path --case numpy-product-removed
    .venv/bin/python -m bench.drift --json drift.json --markdown drift.md
    .venv/bin/python -m bench.drift --report drift.json   # the table again (written after every case)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.drift.cases import DriftCase, load_cases
from bench.drift.envs import default_cache, ensure_environment
from bench.drift.run import WorkflowRun, check_result, index_scopes, run_direct, run_workflow


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", action="append", default=[], help="run only this case (repeatable)")
    parser.add_argument("--quick", action="store_true", help="only the cases marked quick (the test suite's)")
    parser.add_argument("--verify", action="store_true", help="verify the cases instead of running the loop")
    parser.add_argument("--data", type=Path, help="data directory (default: a new temporary one)")
    parser.add_argument("--envs", type=Path, default=default_cache(), help="where environments are cached")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    parser.add_argument("--markdown", type=Path, help="write the table here too")
    parser.add_argument(
        "--report", type=Path, help="print the table of a --json file written earlier (a run cut short too)"
    )
    args = parser.parse_args()
    if args.report:
        reported: list[dict[str, Any]] = json.loads(args.report.read_text(encoding="utf-8"))["cases"]
        print(markdown(reported, summarize(reported)))
        return 0
    cases = load_cases(args.case or None)
    if args.quick:
        cases = [case for case in cases if case.quick]
    if args.verify:
        return verify(cases, args.envs)
    data = args.data or Path(tempfile.mkdtemp(prefix="librarian-drift-"))
    print(f"data directory {data}, environments {args.envs}, {len(cases)} case(s)", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    for case in cases:
        rows.append(measure(case, data, args.envs))
        if args.json:  # after every case, so that a run cut short keeps what it measured
            write_json(args.json, rows, complete=len(rows) == len(cases))
        first, second = rows[-1]["runs"]
        print(
            f"{case.id}: first {'FIXED' if first['fixed'] else 'not fixed'} ({first['strategy']}), "
            f"second {'FIXED' if second['fixed'] else 'not fixed'} "
            f"with {second['research_calls']} research call(s)",
            file=sys.stderr,
        )
    summary = summarize(rows)
    table = markdown(rows, summary)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n", encoding="utf-8")
    return 0


def write_json(path: Path, rows: list[dict[str, Any]], *, complete: bool) -> None:
    document = {"complete": complete, "summary": summarize(rows), "cases": rows}
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def measure(case: DriftCase, data: Path, envs: Path) -> dict[str, Any]:
    """Both runs of one case."""
    started = time.perf_counter()
    environment = ensure_environment(case.environment.manager, case.environment.install, envs)
    build = time.perf_counter() - started
    indexed = index_scopes(case, environment, data)
    with services_for(case, data) as services:
        runs: list[WorkflowRun] = [
            run_workflow(case, environment, services, data=data, run_number=number) for number in (1, 2)
        ]
    return {
        "id": case.id,
        "tool": case.tool,
        "category": case.category,
        "scope": case.scope,
        "install": case.environment.install,
        "environment_seconds": round(build, 1),
        "preindex_seconds": indexed,
        "runs": [run.to_dict() for run in runs],
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The totals the goals are about: over the ``scope: edit`` cases, and over all cases."""
    edits = [row for row in rows if row.get("scope", "edit") == "edit"]
    return {**_totals(edits), "all_cases": _totals(rows), "by_category": _by_category(rows)}


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    firsts = [row["runs"][0] for row in rows]
    fixed = [row for row in rows if row["runs"][0]["fixed"]]
    again = [row for row in fixed if row["runs"][1]["fixed"] and row["runs"][1]["research_calls"] == 0]
    seconds = [s for run in firsts for s in run["correction_seconds"]]
    cold = [s for run in firsts for s in run.get("correction_seconds_with_model_load", [])]
    return {
        "cases": len(rows),
        "tools": len({row["tool"] for row in rows}),
        "fixed_first_run": len(fixed),
        "fixed_first_run_percent": round(100 * len(fixed) / len(rows), 1) if rows else 0.0,
        "fixed_again_without_research": len(again),
        "correction_seconds_p50": round(statistics.median(seconds), 3) if seconds else None,
        "correction_seconds_p95": round(_percentile(seconds, 95), 3) if seconds else None,
        "correction_seconds_with_model_load_p50": round(statistics.median(cold), 3) if cold else None,
        "corrections_measured": len(seconds),
        "indexing_seconds_total": round(sum(run["indexing_seconds"] for run in firsts), 1),
    }


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """The per-case table and the totals."""
    lines = [
        "| case | tool | category | 1st run | strategy (depth) | research | correction s | indexing s "
        "| 2nd run (research) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        first, second = row["runs"]
        seconds = ", ".join(f"{s:.2f}" for s in first["correction_seconds"]) or "-"
        lines.append(
            f"| {row['id']} | {row['tool']} | {row['category']} "
            f"| {'fixed' if first['fixed'] else 'NOT fixed'} "
            f"| {first['strategy'] or '-'} ({first['depth']}) | {first['research_calls']} | {seconds} "
            f"| {first['indexing_seconds']:.1f} | {'fixed' if second['fixed'] else 'NOT fixed'} "
            f"({second['research_calls']}) |"
        )
    every = summary["all_cases"]
    lines += [
        "",
        f"Cases whose fix is an edit (`scope: edit`): fixed on the first run "
        f"**{summary['fixed_first_run']}/{summary['cases']}** ({summary['fixed_first_run_percent']} %) "
        f"over {summary['tools']} tools and libraries; fixed again on the second run with no research "
        f"call: **{summary['fixed_again_without_research']}/{summary['fixed_first_run']}**; correction "
        f"time p50 **{summary['correction_seconds_p50']} s**, p95 {summary['correction_seconds_p95']} s "
        f"over {summary['corrections_measured']} corrections (documentation indexing left out, "
        f"{summary['indexing_seconds_total']} s in all; p50 "
        f"{summary['correction_seconds_with_model_load_p50']} s counting the wait for the embedding "
        "model a new process loads once).",
        "",
        f"All cases (with `scope: rewrite`): fixed on the first run **{every['fixed_first_run']}/"
        f"{every['cases']}** ({every['fixed_first_run_percent']} %) over {every['tools']} tools and "
        f"libraries; fixed again with no research call: {every['fixed_again_without_research']}/"
        f"{every['fixed_first_run']}; correction time p50 {every['correction_seconds_p50']} s.",
        "",
        "By category (all cases): "
        + ", ".join(f"{category} {score}" for category, score in summary["by_category"].items())
        + ".",
    ]
    return "\n".join(lines)


def verify(cases: list[DriftCase], envs: Path) -> int:
    """Each case is real: the original passes on the baseline, fails on the new version, the fix passes."""
    failures = 0
    for case in cases:
        problems = []
        new = ensure_environment(case.environment.manager, case.environment.install, envs)
        with services_for(case, Path(tempfile.mkdtemp(prefix="drift-verify-"))) as services:
            original = _subject(case.task.payload)
            if case.environment.baseline:
                old = ensure_environment(case.environment.manager, case.environment.baseline, envs)
                ran = run_direct(case, old, services, **original)
                if (why := check_result(case, ran, services)) or ran.exit_code != case.task.payload.get(
                    "expect", {}
                ).get("exit_code", 0):
                    problems.append(f"the original fails on the baseline: {why or ran.stderr[-300:]}")
            ran = run_direct(case, new, services, **original)
            output = ran.stderr + ran.stdout
            if not check_result(case, ran, services):
                problems.append("the original passes its check on the new version")
            missing = [text for text in case.error_contains if text not in output]
            if missing:
                problems.append(f"the new version's output lacks {missing}: {output[-300:]}")
            fixed = run_direct(case, new, services, argv=case.fixed.argv, code=case.fixed.code)
            if why := check_result(case, fixed, services):
                problems.append(f"the known fix fails its check: {why}")
        failures += bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {case.id}: " + ("; ".join(problems) or "verified"))
    print(f"{len(cases) - failures} verified, {failures} failed")
    return 1 if failures else 0


@contextlib.contextmanager
def services_for(case: DriftCase, data: Path) -> Iterator[dict[str, str]]:
    """The services a case's task talks to (an S3 server), started for its runs."""
    if "s3" not in case.services:
        yield {}
        return
    from librarian.demo.s3 import S3Server

    with S3Server(data / "s3") as server:
        yield {"s3": server.endpoint}


def _subject(payload: dict[str, Any]) -> dict[str, Any]:
    if "code" in payload:
        return {"code": payload["code"]}
    return {"argv": list(payload["argv"])}


def _percentile(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(percent / 100 * (len(ordered) - 1))))
    return ordered[index]


def _by_category(rows: list[dict[str, Any]]) -> dict[str, str]:
    counts: dict[str, list[int]] = {}
    for row in rows:
        total = counts.setdefault(row["category"], [0, 0])
        total[0] += int(row["runs"][0]["fixed"])
        total[1] += 1
    return {category: f"{fixed}/{total}" for category, (fixed, total) in sorted(counts.items())}


if __name__ == "__main__":
    sys.exit(main())
