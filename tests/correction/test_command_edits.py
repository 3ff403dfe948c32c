"""Command-line edits guided by the docs, on the real help and the real errors of installed tools.

Each tool's help is walked by the CLI-help connector (the same pages the loop loads from the store),
each error is what the installed tool prints for the command, and every candidate is checked against
what the tool then does with it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from librarian.correction.candidates import FailureInput
from librarian.correction.command_edits import CommandEdits, keeps_meaning, name_similarity
from librarian.correction.command_tree import CommandTree
from librarian.correction.docs_check import check_against_docs
from librarian.correction.edits import Edit, apply_edits, compatible
from librarian.correction.error_hints import command_hints
from librarian.correction.helpdocs import CommandDoc, OptionDoc, synopsis_forms
from librarian.ingest.sources.cli_help import cli_documents, walk_cli_help

BIN = Path(sys.executable).parent
RUFF = str(BIN / "ruff")


def tree_of(command: str, *, scopes: Sequence[str] = (), max_depth: int = 1) -> CommandTree:
    """The tool's documented commands, as the loop builds them from the indexed pages."""
    result = walk_cli_help(command, scopes=scopes, max_depth=max_depth)
    snippets = [
        {"entity_name": doc.path, "content": doc.text, "attributes": doc.metadata, "source_url": doc.url}
        for doc in cli_documents(result, command=Path(command).name)
    ]
    return CommandTree.from_snippets(snippets)


@pytest.fixture(scope="module")
def ruff_tree() -> CommandTree:
    return tree_of(RUFF)


def failure_of(argv: list[str], tree: CommandTree, workspace: Path, **extra: object) -> FailureInput:
    done = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, check=False)
    assert done.returncode != 0, done
    return FailureInput(
        argv=argv,
        exit_code=done.returncode,
        stderr=done.stderr,
        stdout=done.stdout,
        workspace=workspace,
        tree=tree,
        tool=Path(argv[0]).name,
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
def lint_target(tmp_path: Path) -> Path:
    (tmp_path / "bad.py").write_text("import os\n", encoding="utf-8")
    return tmp_path


def test_a_renamed_option_is_found_in_the_docs_and_runs(ruff_tree: CommandTree, lint_target: Path) -> None:
    failure = failure_of([RUFF, "check", "--format", "json", "bad.py"], ruff_tree, lint_target)
    best = CommandEdits().propose(failure)[0]
    assert best.argv == [RUFF, "check", "--output-format", "json", "bad.py"]
    assert best.confidence >= 0.7 and best.evidence["documented"]
    ran = subprocess.run(best.argv, cwd=lint_target, capture_output=True, text=True, check=False)
    assert '"code": "F401"' in ran.stdout  # the JSON really is printed


def test_a_misleading_suggestion_is_not_applied(ruff_tree: CommandTree, lint_target: Path) -> None:
    """ruff suggests `--show-files` for `--show-source`: a spelling match, not the same meaning."""
    failure = failure_of([RUFF, "check", "--show-source", "bad.py"], ruff_tree, lint_target)
    assert "--show-files" in failure.stderr
    candidates = CommandEdits().propose(failure)
    suggested = [c for c in candidates if "--show-files" in c.argv]
    assert suggested and all(c.confidence < 0.7 for c in suggested)


def test_a_subcommand_is_inserted_where_the_bare_form_was_removed(
    ruff_tree: CommandTree, lint_target: Path
) -> None:
    """`ruff bad.py`: the file is taken for a subcommand; research ranks `check` first for the task."""
    check = ruff_tree.command(("check",))
    assert check is not None
    research = [{**check.snippet, "score": 1.3}]
    failure = failure_of([RUFF, "bad.py"], ruff_tree, lint_target, snippets=research)
    best = CommandEdits().propose(failure)[0]
    assert best.argv == [RUFF, "check", "bad.py"] and best.confidence >= 0.7
    # Without research the documented subcommands that take files tie, and none is confident.
    unranked = CommandEdits().propose(failure_of([RUFF, "bad.py"], ruff_tree, lint_target))
    assert all(c.confidence < 0.7 for c in unranked)


def test_git_replacement_named_in_the_error_wins_over_its_alternatives(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    tree = tree_of("git", scopes=("branch",))
    failure = failure_of(["git", "branch", "--set-upstream", "origin/main"], tree, tmp_path)
    best = CommandEdits().propose(failure)[0]
    # "Please use '--track' or '--set-upstream-to' instead": the alternative closest to the old name.
    assert best.argv == ["git", "branch", "--set-upstream-to", "origin/main"]
    assert "no longer supported" in best.rationale


def test_an_option_the_docs_no_longer_have_is_dropped_when_nothing_replaced_it(tmp_path: Path) -> None:
    pip = str(BIN / "pip")
    tree = tree_of(pip, scopes=("list",))
    failure = failure_of([pip, "list", "--no-such-flag-xyz", "--format", "json"], tree, tmp_path)
    best = CommandEdits().propose(failure)[0]
    assert best.argv == [pip, "list", "--format", "json"]
    assert best.evidence["edits"][0]["kind"] == "drop_option"


# --- the pieces, on help texts as tools print them ----------------------------------------------------


def test_a_flag_becomes_a_listed_value_with_the_flag_it_requires() -> None:
    """The docs list `string_processing` among the values of an option that "Requires `--preview`"."""
    feature = OptionDoc(
        "--enable-unstable-feature",
        takes_value=True,
        value_hint="[string_processing|hug_parens|wrap_long_dict_values]",
        description="Enable specific features included in the `--unstable` style. Requires `--preview`.",
    )
    preview = OptionDoc("--preview", description="Enable potentially disruptive style changes.")
    page = CommandDoc(
        "fmt",
        (),
        {feature.name: feature, preview.name: preview},
        frozenset(),
        tuple(synopsis_forms("fmt [OPTIONS] SRC ...")),
        "fmt [OPTIONS] SRC ...",
    )
    failure = FailureInput(
        argv=["fmt", "--experimental-string-processing", "a.py"],
        exit_code=2,
        stderr="Error: No such option '--experimental-string-processing'.",
        tree=CommandTree([page]),
        tool="fmt",
    )
    best = CommandEdits().propose(failure)[0]
    assert best.argv == ["fmt", "--enable-unstable-feature=string_processing", "--preview", "a.py"]


def test_an_option_split_in_two_becomes_the_one_whose_description_says_it_with_its_companion() -> None:
    """biome 2: `--apply-unsafe` is gone; `--unsafe` "Apply unsafe fixes. Should be used with `--write`"."""
    unsafe = OptionDoc(
        "--unsafe", description="Apply unsafe fixes. Should be used with `--write` or `--fix`."
    )
    write = OptionDoc("--write", description="Apply safe fixes, formatting and import sorting.")
    fix = OptionDoc("--fix", description="Alias of `--write`, writes safe fixes.")
    page = CommandDoc(
        "lintkit",
        ("check",),
        {option.name: option for option in (unsafe, write, fix)},
        frozenset(),
        tuple(synopsis_forms("lintkit check [--write] [--unsafe] [PATH]...")),
        "lintkit check [--write] [--unsafe] [PATH]...",
    )
    failure = FailureInput(
        argv=["lintkit", "check", "--apply-unsafe", "app.js"],
        exit_code=1,
        stderr="Error: `--apply-unsafe` is not expected in this context",
        tree=CommandTree([page]),
        tool="lintkit",
    )

    best = CommandEdits().propose(failure)[0]

    assert best.argv == ["lintkit", "check", "--write", "--unsafe", "app.js"], best
    assert best.confidence >= 0.7, best
    # A description that says only part of the old meaning is no rename.
    partial = OptionDoc("--unsafe", description="Allow rules marked unsafe.")
    page_partial = replace(page, options={partial.name: partial, write.name: write})
    unrelated = FailureInput(**{**failure.__dict__, "tree": CommandTree([page_partial])})
    assert all(c.argv[2:4] != ["--write", "--unsafe"] for c in CommandEdits().propose(unrelated))


def test_a_correction_never_brings_in_an_option_that_only_prints_help() -> None:
    """`--help` lists `unstable` among its values; the output names the flag to use instead."""
    help_option = OptionDoc(
        "--help",
        ("-h",),
        takes_value=True,
        value_hint="[<CONTEXT>]",
        description="Print help [possible values: unstable, full]",
    )
    kv = OptionDoc("--unstable-kv", description="Enable unstable KV APIs")
    page = CommandDoc(
        "run",
        (),
        {help_option.name: help_option, "-h": help_option, kv.name: kv},
        frozenset(),
        tuple(synopsis_forms("run [OPTIONS] [SCRIPT_ARG]...")),
        "run [OPTIONS] [SCRIPT_ARG]...",
    )
    failure = FailureInput(
        argv=["tool", "run", "--unstable", "--allow-read", "kv.ts"],
        exit_code=1,
        stderr=(
            "Warning The `--unstable` flag has been removed in Deno 2.0. Use granular `--unstable-*` flags "
            "instead.\nerror: Uncaught TypeError: openKv is not a function\n"
            "    hint: Run again with `--unstable-kv` flag to enable this API."
        ),
        tree=CommandTree([page]),
        tool="tool",
    )
    proposed = CommandEdits().propose(failure)
    assert proposed and not any("--help" in token for c in proposed for token in c.argv)
    assert proposed[0].argv == ["tool", "run", "--unstable-kv", "--allow-read", "kv.ts"]


def test_the_negation_of_a_documented_option_the_output_asks_for_is_added() -> None:
    """commander derives `--no-config` from `--config [file]` and lists only the latter."""
    config = OptionDoc("--config", ("-c",), takes_value=True, value_hint="[file]", description="read rules")
    page = CommandDoc(
        "depcruise",
        (),
        {config.name: config, "-c": config},
        frozenset(),
        tuple(synopsis_forms("depcruise [options] [files-or-directories...]")),
        "depcruise [options] [files-or-directories...]",
    )
    failure = FailureInput(
        argv=["depcruise", "--output-type", "json", "src"],
        exit_code=1,
        stderr=(
            "ERROR: Can't open a config file (.dependency-cruiser.(c)js) at the default location.\n"
            " - Want to run a without a config file? Use --no-config"
        ),
        tree=CommandTree([page]),
        tool="depcruise",
    )
    best = CommandEdits().propose(failure)[0]
    assert best.argv == ["depcruise", "--no-config", "--output-type", "json", "src"]
    assert best.confidence >= 0.7, best
    unrelated = FailureInput(
        argv=["depcruise", "src"],
        exit_code=1,
        stderr="Want to run without a cache? Use --no-cache",
        tree=CommandTree([page]),
        tool="depcruise",
    )
    assert all(c.confidence < 0.7 for c in CommandEdits().propose(unrelated))


def _lock_page(help_text: str) -> CommandDoc:
    regenerate = OptionDoc("--regenerate", description="Ignore existing lock file and start from scratch.")
    return CommandDoc(
        "tool",
        ("lock",),
        {regenerate.name: regenerate},
        frozenset(),
        tuple(synopsis_forms("lock [options]")),
        "lock [options]",
        {"content": f"# tool lock\n\nLocks the project dependencies.\n\n{help_text}"},
    )


def test_a_negated_flag_is_dropped_only_when_the_docs_say_its_behaviour_is_the_default() -> None:
    """Poetry 2 removed `lock --no-update` (not updating is the default now) and `install --no-dev`."""
    default = "By default, packages that have already been added to the lock file before will not be updated."
    failure = FailureInput(
        argv=["tool", "lock", "--no-update"],
        exit_code=1,
        stderr='The option "--no-update" does not exist',
        tree=CommandTree([_lock_page(default)]),
        tool="tool",
    )
    best = CommandEdits().propose(failure)[0]
    assert best.argv == ["tool", "lock"] and best.confidence >= 0.7, best
    silent = FailureInput(
        **{**failure.__dict__, "tree": CommandTree([_lock_page("It writes the lock file.")])}
    )
    assert all(c.confidence < 0.7 for c in CommandEdits().propose(silent))


def test_a_template_in_the_error_inserts_the_subcommand() -> None:
    hints = command_hints(
        "error: `tool <path>` has been removed. Use `tool check <path>` instead.", ["tool", "a.py"]
    )
    assert [t.words for t in hints.templates] == [("check",)]
    assert hints.subcommand_required


def test_ignored_and_required_options_are_read_from_the_output() -> None:
    argv = ["tool", "--loglevel", "debug", "a.js"]
    hints = command_hints("[warn] Ignored unknown option --loglevel=debug. Did you mean --log-level?", argv)
    assert [r.option for r in hints.ignored] == ["--loglevel"]
    required = command_hints("'--feature' requires '--preview'.", ["tool", "--feature=x"])
    assert required.required_options == ("--preview",)
    listed = command_hints(
        "error: the following required arguments were not provided:\n  --global\n\n"
        "Note: Permission flags can only be used in a global setting --not-this",
        ["tool", "install", "-n", "hello", "hello.ts"],
    )
    assert listed.required_options == ("--global",)
    hinted = command_hints(
        "error: openKv is not a function\n  hint: Run again with `--unstable-kv` flag to enable this API.",
        ["tool", "run", "kv.ts"],
    )
    assert hinted.required_options == ("--unstable-kv",)


def test_names_keep_their_meaning_or_not() -> None:
    assert keeps_meaning("--clear-app-data", "--reset-app-data")
    assert keeps_meaning("--format", "--output-format")
    assert not keeps_meaning("--screw-ie8", "--ie")
    assert not keeps_meaning("--allow-none", "--allow-net")
    assert keeps_meaning("--testPathPattern", "--testPathPatterns")
    assert keeps_meaning("--out-dir", "--out-directory")
    assert name_similarity("--testPathPattern", "--testPathPatterns") > 0.8


def test_edits_compose_and_the_docs_check_blames_only_what_they_bring_in() -> None:
    insert = Edit("insert_subcommand", 1, 1, ("run",), 0.8, "x", "subcommand")
    rename = Edit("rename_option", 1, 2, ("--new",), 0.8, "y", "--old")
    assert compatible(insert, rename)
    argv = apply_edits(["tool", "--old", "f.txt", "--kept"], [insert, rename])
    assert argv == ["tool", "run", "--new", "f.txt", "--kept"]
    run = CommandDoc("tool", ("run",), {"--new": OptionDoc("--new")}, frozenset(), (), "")
    verdict = check_against_docs(argv, ["tool", "--old", "f.txt", "--kept"], CommandTree([run]))
    # `--kept` was in the failed command: the help may just not list it; it is not this edit's doing.
    assert verdict.unknown == () and verdict.factor > 1
    worse = check_against_docs(
        ["tool", "run", "--bogus", "f.txt"], ["tool", "--old", "f.txt"], CommandTree([run])
    )
    assert worse.unknown == ("--bogus",) and worse.factor < 0.5
