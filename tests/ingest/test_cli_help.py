"""The CLI help walker: real tools (AWS CLI v1, git), a hostile fake CLI, and the help parser."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

from librarian.errors import InvalidInputError, NotFoundError
from librarian.ingest.sources.cli_help import (
    OUTPUT_CAP_BYTES,
    CliCommand,
    CliHelpResult,
    cli_documents,
    detect_cli_version,
    walk_cli_help,
)
from librarian.ingest.sources.cli_help_parse import clean_help_text, parse_help
from tests.processes import process_gone, wait_for

AWS = Path(sys.executable).parent / "aws"
GIT = shutil.which("git")

needs_aws = pytest.mark.skipif(not AWS.exists(), reason="the AWS CLI (librarian[demo]) is not installed")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def _command(result: CliHelpResult, *path: str) -> CliCommand:
    found = [c for c in result.commands if c.path == path]
    assert found, f"{path} not walked; walked: {[c.path for c in result.commands]}"
    return found[0]


def _option_names(command: CliCommand) -> set[str]:
    return {spelling for option in command.options for spelling in option.spellings}


# --- the real AWS CLI v1 ------------------------------------------------------------------------


@needs_aws
def test_aws_version_is_the_installed_awscli() -> None:
    assert detect_cli_version(str(AWS)) == importlib.metadata.version("awscli")


@needs_aws
def test_aws_s3api_put_object_accepts_tagging_and_bucket() -> None:
    # The whole s3api subtree at depth 2 takes about a minute (115 pages); a nested scope walks the
    # same levels (aws, aws s3api, aws s3api put-object) with the same strategies.
    result = walk_cli_help(str(AWS), scopes=("s3api put-object",), max_depth=2)

    assert [c.path for c in result.commands] == [(), ("s3api",), ("s3api", "put-object")]
    put_object = _command(result, "s3api", "put-object")
    assert {"--tagging", "--bucket", "--key"} <= _option_names(put_object)
    assert "--tagging" in put_object.synopsis and "--bucket" in put_object.synopsis
    tagging = next(o for o in put_object.options if o.name == "--tagging")
    assert tagging.takes_value and "tag-set" in tagging.description
    assert next(o for o in put_object.options if o.name == "--region").is_global
    assert "put-object" in _command(result, "s3api").subcommands
    assert result.version == importlib.metadata.version("awscli")

    docs = {d.path: d for d in cli_documents(result, command="aws")}
    doc = docs["s3api/put-object"]
    assert doc.url == "cli://aws/s3api/put-object"
    assert doc.metadata["command"] == "aws"
    assert doc.metadata["subcommand_path"] == ["s3api", "put-object"]
    assert "--tagging" in doc.metadata["options"] and "--region" not in doc.metadata["options"]
    assert "--region" in doc.metadata["global_options"]
    summary, section, *examples = doc.parsed.sections
    assert summary.path == section.path == ("aws", "s3api put-object") and section.entity_type == "command"
    # Worked examples stay under the command's name, each with its title and its fenced command line.
    assert examples and all(e.entity_type == "example" and e.path == section.path for e in examples)
    assert examples[0].text.startswith("Example 1:") and "```\naws s3api put-object" in examples[0].text
    # The purpose sentence leads, past the end-of-support notices the real page opens with.
    assert summary.text.startswith("Adds an object to a bucket.") and "--" not in summary.text
    assert "`--tagging`" in section.text and doc.text.startswith("# aws s3api put-object\n")
    assert docs["aws"].url == "cli://aws/" and docs["aws"].parsed.sections[0].path == ("aws", "aws")


@needs_aws
def test_aws_scope_walks_only_the_named_service() -> None:
    result = walk_cli_help(str(AWS), scopes=("s3api",), max_depth=1)

    assert [c.path for c in result.commands] == [(), ("s3api",)]
    root = _command(result)
    assert len(root.subcommands) > 300 and "s3api" in root.subcommands and "ec2" in root.subcommands
    assert len(_command(result, "s3api").subcommands) > 100


@needs_aws
def test_aws_s3_cp_options_do_not_include_tagging() -> None:
    result = walk_cli_help(str(AWS), scopes=("s3",), max_depth=2)

    assert {c.path[0] for c in result.commands if c.path} == {"s3"}
    cp = _command(result, "s3", "cp")
    names = _option_names(cp)
    assert {"--recursive", "--dryrun", "--metadata"} <= names
    assert "--tagging" not in names
    assert cp.description.startswith("Copies a local file or S3 object")
    assert {"cp", "ls", "sync"} <= set(_command(result, "s3").subcommands)


# --- real git -----------------------------------------------------------------------------------


@needs_git
def test_git_commit_has_amend() -> None:
    assert GIT is not None
    result = walk_cli_help(GIT, scopes=("commit",), max_depth=1)

    commit = _command(result, "commit")
    assert "--amend" in _option_names(commit)
    assert {"-m", "--message"} <= _option_names(commit)
    assert "commit" in _command(result).subcommands
    assert result.version is not None and result.version[0].isdigit()


# --- a hostile fake CLI -------------------------------------------------------------------------

_FAKE = """\
#!{python}
import json, os, subprocess, sys, time

LOG = {log!r}
args = sys.argv[1:]
with open(os.path.join(LOG, "calls.jsonl"), "a") as calls:
    calls.write(json.dumps(args) + "\\n")
if args == ["--version"]:
    print("fakecli version 3.1.4")
    sys.exit(0)
if not args or args[-1] != "--help":
    print("fakecli: unknown arguments", args, file=sys.stderr)
    sys.exit(2)
path = args[:-1]
if path == []:
    with open(os.path.join(LOG, "env.json"), "w") as out:
        json.dump(dict(os.environ), out)
    print("Usage: fakecli <command> [options]")
    print()
    print("Commands:")
    for name in ["hang", "daemon", "flood", "leaf", "group", "$(touch {pwned})", "; rm -rf {victim}"]:
        print("  " + name.ljust(30) + "  A command.")
    print()
    print("Options:")
    print("  -v, --verbose                   Talk more.")
elif path == ["hang"]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(os.path.join(LOG, "hang.pids"), "w") as out:
        out.write(f"{{os.getpid()}} {{child.pid}}")
    time.sleep(60)
elif path == ["daemon"]:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    with open(os.path.join(LOG, "daemon.pid"), "w") as out:
        out.write(str(child.pid))
    print("Usage: fakecli daemon [--detach]")
elif path == ["flood"]:
    sys.stdout.write("Usage: fakecli flood [--fast]\\n\\n")
    sys.stdout.flush()
    block = b"x" * (1024 * 1024)
    for _ in range(50):
        sys.stdout.buffer.write(block)
elif path == ["leaf"]:
    print("Usage: fakecli leaf [--tagging <value>]")
    print()
    print("Options:")
    print("  --tagging <value>  Tags to set.")
elif path == ["group"]:
    print("Usage: fakecli group <command>")
    print()
    print("Commands:")
    for i in range(30):
        print(f"  member{{i:02d}}    Member {{i}}.")
elif len(path) == 2 and path[0] == "group":
    print(f"Usage: fakecli group {{path[1]}} [--flag]")
else:
    print("fakecli: no such command", file=sys.stderr)
    sys.exit(2)
"""


@pytest.fixture
def fake_cli(tmp_path: Path) -> Path:
    """A CLI whose subcommands hang, flood, list hostile names and record every call."""
    log = tmp_path / "log"
    log.mkdir()
    script = tmp_path / "bin" / "fakecli"
    script.parent.mkdir()
    script.write_text(
        _FAKE.format(
            python=sys.executable, log=str(log), pwned=tmp_path / "PWNED", victim=tmp_path / "victim"
        )
    )
    script.chmod(0o755)
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("still here")
    return script


def _calls(fake_cli: Path) -> list[list[str]]:
    import json

    lines = (fake_cli.parent.parent / "log" / "calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_fake_version_and_leaf_options(fake_cli: Path) -> None:
    assert detect_cli_version(str(fake_cli)) == "3.1.4"
    result = walk_cli_help(str(fake_cli), scopes=("leaf",), max_depth=1)
    leaf = _command(result, "leaf")
    assert [(o.name, o.takes_value, o.value_hint) for o in leaf.options] == [("--tagging", True, "<value>")]
    assert leaf.help_args == ("leaf", "--help")
    assert leaf.description == "A command."  # the page has none: the parent's summary stands in


def test_hanging_help_is_killed_with_its_process_group(fake_cli: Path) -> None:
    started = time.monotonic()
    result = walk_cli_help(str(fake_cli), scopes=("hang",), max_depth=1, timeout=2.0)
    elapsed = time.monotonic() - started

    assert elapsed < 10, f"walk took {elapsed:.1f}s with a 2s timeout"
    assert [c.path for c in result.commands] == [()]
    (problem,) = [p for p in result.problems if p.path == "hang"]
    assert "timed out after 2s" in problem.reason and "fakecli hang --help" in problem.reason
    pids = (fake_cli.parent.parent / "log" / "hang.pids").read_text().split()
    assert all(wait_for(functools.partial(process_gone, int(pid)), 5.0) for pid in pids)
    # A hang is not retried with the other strategies: one call for "hang", with --help.
    assert [call for call in _calls(fake_cli) if "hang" in call] == [["hang", "--help"]]


def test_processes_left_behind_by_a_help_run_are_killed(fake_cli: Path) -> None:
    result = walk_cli_help(str(fake_cli), scopes=("daemon",), max_depth=1)

    assert _command(result, "daemon").synopsis == "fakecli daemon [--detach]"
    pid = int((fake_cli.parent.parent / "log" / "daemon.pid").read_text())
    assert wait_for(lambda: process_gone(pid), 5.0)


def test_flooding_help_is_capped(fake_cli: Path) -> None:
    started = time.monotonic()
    result = walk_cli_help(str(fake_cli), scopes=("flood",), max_depth=1, timeout=20.0)

    assert time.monotonic() - started < 15
    (problem,) = [p for p in result.problems if p.path == "flood"]
    assert "truncated" in problem.reason and str(OUTPUT_CAP_BYTES) in problem.reason
    flood = _command(result, "flood")
    assert flood.synopsis == "fakecli flood [--fast]"
    assert len(flood.raw_help) <= 64 * 1024


def test_hostile_subcommand_names_are_refused_and_never_run(fake_cli: Path, tmp_path: Path) -> None:
    result = walk_cli_help(str(fake_cli), scopes=("leaf",), max_depth=2)
    refused = [p.reason for p in result.problems if "refused subcommand name" in p.reason]

    assert len(refused) == 2
    assert any("$(touch" in reason for reason in refused) and any("; rm -rf" in reason for reason in refused)
    assert not (tmp_path / "PWNED").exists()
    assert (tmp_path / "victim" / "keep.txt").read_text() == "still here"
    assert not [call for call in _calls(fake_cli) if any("$(" in a or ";" in a for a in call)]
    assert _command(result).subcommands == ["hang", "daemon", "flood", "leaf", "group"]


def test_child_sees_a_scrubbed_environment(
    fake_cli: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json

    monkeypatch.setenv("FAKE_SECRET", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "also-secret")
    walk_cli_help(str(fake_cli), max_depth=0, env={"FAKE_EXTRA": "on purpose"})

    seen = json.loads((tmp_path / "log" / "env.json").read_text())
    assert "FAKE_SECRET" not in seen and "AWS_SECRET_ACCESS_KEY" not in seen
    assert "hunter2" not in json.dumps(seen)
    assert seen["FAKE_EXTRA"] == "on purpose"
    assert seen["HOME"] != os.environ.get("HOME") and seen["PAGER"] == "cat"
    assert seen["AWS_EC2_METADATA_DISABLED"] == "true"


def test_max_commands_is_respected(fake_cli: Path) -> None:
    result = walk_cli_help(str(fake_cli), scopes=("group",), max_depth=2, max_commands=5)

    assert len(result.commands) == 5
    assert [c.path for c in result.commands][:2] == [(), ("group",)]
    assert any("max_commands=5 reached: 27 more" in p.reason for p in result.problems)
    walked_members = {call[1] for call in _calls(fake_cli) if len(call) == 3 and call[0] == "group"}
    assert walked_members == {"member00", "member01", "member02"}


def test_bad_arguments_are_refused(fake_cli: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError):
        walk_cli_help(str(fake_cli), scopes=("$(id)",))
    with pytest.raises(InvalidInputError):
        walk_cli_help("--help")
    with pytest.raises(NotFoundError):
        walk_cli_help(str(tmp_path / "no-such-tool"))


# --- the parser on its own ----------------------------------------------------------------------


def test_overstrike_and_ansi_are_stripped() -> None:
    raw = b"N\x08NA\x08AM\x08ME\x08E\n       _\x08p_\x08u_\x08t - stores\n\x1b[1m--bold\x1b[0m\r\n"
    assert clean_help_text(raw) == "NAME\n       put - stores\n--bold"


def test_man_page_layout() -> None:
    page = parse_help(
        textwrap.dedent(
            """\
            TOOL-RUN(1)                     Tool Manual                     TOOL-RUN(1)

            NAME
                   tool-run - Run a job

            SYNOPSIS
                   tool run [--dry-run] [--[no-]color] <job>

            OPTIONS
                   -n, --dry-run
                       Show what would run. Lines may wrap
                       and continue here.

                   --[no-]color
                       Colour the output.

                   -C <dir>, --directory=<dir>
                       Run in <dir>.

            COMMANDS
                   add <name> [<url>]
                       Add a job.

                   o remove
                       Remove a job.

            Tool 1.0                         2024-01-01                     TOOL-RUN(1)
            """
        )
    )
    assert page.synopsis == "tool run [--dry-run] [--[no-]color] <job>"
    assert page.description == "Run a job"
    by_name = {o.name: o for o in page.options}
    assert set(by_name) == {"--dry-run", "--color", "--directory"}
    assert by_name["--dry-run"].aliases == ("-n",) and not by_name["--dry-run"].takes_value
    assert by_name["--dry-run"].description == "Show what would run. Lines may wrap and continue here."
    assert by_name["--color"].aliases == ("--no-color",)
    assert by_name["--directory"].aliases == ("-C",) and by_name["--directory"].value_hint == "<dir>"
    assert [name for name, _ in page.subcommands] == ["add", "remove"]


def test_usage_screen_layout() -> None:
    page = parse_help(
        textwrap.dedent(
            """\
            usage: tool commit [-q] [-m <msg>]
                               [--amend]

                -q, --quiet           suppress output

            Message options
                -m, --message <message>
                                      commit message
                --amend               amend previous commit
            """
        )
    )
    assert page.synopsis == "tool commit [-q] [-m <msg>]\n    [--amend]"
    assert [(o.name, o.group) for o in page.options] == [
        ("--quiet", ""),
        ("--message", "Message options"),
        ("--amend", "Message options"),
    ]
    assert page.options[1].description == "commit message" and page.options[1].value_hint == "<message>"


def test_click_examples_heading_is_no_subcommand() -> None:
    # click prints a "no-rewrap" paragraph ("Examples:" then deeper lines) before its commands.
    page = parse_help(
        textwrap.dedent(
            """\
            Usage: tool [OPTIONS] COMMAND [ARGS]...

              Lint your files.

              Examples:
                  tool lint models/
                  tool fix --force models/

            Options:
              --version  Show the version and exit.
              --help     Show this message and exit.

            Commands:
              fix     Fix files.
              lint    Lint files.
              render  Render a file.
            """
        )
    )
    assert [name for name, _ in page.subcommands] == ["fix", "lint", "render"]
    assert {o.name for o in page.options} == {"--version", "--help"}


def test_clap_long_help_options_with_descriptions_below() -> None:
    # clap's --help (long help): every description on its own deeper lines, long-only options
    # aligned deeper than "-h, --help" and without a blank line between entries.
    page = parse_help(
        textwrap.dedent(
            """\
            Usage: tool check [OPTIONS] [FILES]...

            Options:
                  --fix
                      Apply fixes to resolve lint violations
                  --output-format <OUTPUT_FORMAT>
                      Output serialization format for violations

                      [possible values: concise, full, json]
              -w, --watch
                      Run in watch mode
                  --color <WHEN>
                      Colour the output

                      Possible values:
                      - auto:   when the output is a terminal
                      - always: always

              -h, --help
                      Print help
            """
        )
    )
    by_name = {o.name: o for o in page.options}
    assert list(by_name) == ["--fix", "--output-format", "--watch", "--color", "--help"]
    assert by_name["--output-format"].takes_value
    assert "concise, full, json" in by_name["--output-format"].description
    assert by_name["--watch"].aliases == ("-w",)
    assert by_name["--color"].description == "Colour the output [possible values: auto, always]"
    assert by_name["--help"].description == "Print help"


_HELP_COMMAND_CLI = """\
#!{python}
import sys

args = sys.argv[1:]
usage = (
    "usage:\\n"
    "    validate:  schemer [validate] -s schema -d data\\n"
    "    compile:   schemer compile -s schema\\n"
    "    help:      schemer help\\n"
    "               schemer help <command>\\n"
)
if args == ["help"]:
    print("Validate data\\n    schemer [validate] -s schema -d data\\n\\nMore information:")
    print("        schemer help validate\\n        schemer help compile")
elif args == ["help", "validate"]:
    print("Validate data\\n    schemer [validate] -s schema -d data\\n")
    print("options:\\n    --errors=          error reporting format (js by default)")
    print("    --strict=false     disable strict mode")
elif args == ["help", "compile"]:
    print("Compile schemas\\n    schemer compile -s schema\\n")
    print("options:\\n    --spec=            draft to use")
else:
    print("error: parameter " + (args[0] if args else "-s") + " is unknown\\n\\n" + usage, file=sys.stderr)
    sys.exit(2)
"""


def test_a_tool_that_documents_itself_only_through_help_command(tmp_path: Path) -> None:
    """No ``--help``, no ``--version``, commands only named as ``TOOL help CMD``: found, and the
    version read from the npm package that installed the program."""
    package = tmp_path / "node_modules" / "schemer-cli"
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(
        '{"name": "schemer-cli", "version": "5.0.0", "bin": {"schemer": "bin/cli.js"}}', encoding="utf-8"
    )
    program = package / "bin" / "cli.js"
    program.write_text(_HELP_COMMAND_CLI.format(python=sys.executable), encoding="utf-8")
    program.chmod(0o755)
    (tmp_path / "node_modules" / ".bin").mkdir()
    (tmp_path / "node_modules" / ".bin" / "schemer").symlink_to("../schemer-cli/bin/cli.js")
    search_path = f"{tmp_path / 'node_modules' / '.bin'}:{os.environ['PATH']}"

    result = walk_cli_help("schemer", max_depth=2, env={"PATH": search_path})

    assert result.version == "5.0.0"
    by_name = {command.name: command for command in result.commands}
    assert set(by_name) == {"", "validate", "compile"}
    options = {option.name: option for option in by_name["validate"].options}
    assert options["--errors"].takes_value and options["--errors"].description.startswith("error reporting")
    assert options["--strict"].value_hint == "false"


def test_clap_short_help_long_only_option_right_after_an_inline_description() -> None:
    page = parse_help(
        textwrap.dedent(
            """\
            Usage: tool run [OPTIONS] [SCRIPT_ARG]...

            Options:
                  --ext <ext>             Set content type [possible values: ts, js]
              -h, --help[=<CONTEXT>]      [possible values: unstable, full]
                  --location <HREF>       Value of globalThis.location
              -q, --quiet                 Suppress diagnostic output
            """
        )
    )
    by_name = {o.name: o for o in page.options}
    assert list(by_name) == ["--ext", "--help", "--location", "--quiet"]
    assert by_name["--help"].description == "[possible values: unstable, full]"
    assert by_name["--location"].value_hint == "<HREF>"


# A framework (cleo, Symfony Console) that answers `TOOL --help` with the page of its `list` command;
# the commands are what `TOOL list` prints. The text is what Poetry 2.0 prints.
_LIST_COMMAND_CLI = """#!{python}
import sys
args = sys.argv[1:]
options = "Options:\\n  -h, --help   Display help for the given command.\\n  -q, --quiet  Be quiet.\\n"
if args in (["--help"], ["help"], ["-h"]):
    print("\\nDescription:\\n  Lists commands.\\n\\nUsage:\\n  list [options] [--] [<namespace>]\\n")
    print("Arguments:\\n  namespace    The namespace name\\n\\n" + options)
elif args in ([], ["list"]):
    print("Tool (version 2.0.0)\\n\\nUsage:\\n  command [options] [arguments]\\n\\n" + options)
    print("Available commands:\\n  install   Installs the project dependencies.")
    print("  lock      Locks the project dependencies.\\n")
elif args and args[0] in ("install", "lock") and args[1:] in (["--help"], []):
    print("\\nDescription:\\n  Does " + args[0] + ".\\n\\nUsage:\\n  " + args[0] + " [options]\\n")
    print(options)
    print("      --only=ONLY  The only dependency groups to include.")
else:
    print("The command does not exist.", file=sys.stderr)
    sys.exit(1)
"""


def test_a_root_help_that_is_the_page_of_the_command_listing_command(tmp_path: Path) -> None:
    program = tmp_path / "tool"
    program.write_text(_LIST_COMMAND_CLI.format(python=sys.executable), encoding="utf-8")
    program.chmod(0o755)

    result = walk_cli_help(str(program), max_depth=1)

    by_name = {command.name: command for command in result.commands}
    assert set(by_name) == {"", "install", "lock"}, [p.reason for p in result.problems]
    assert "--only" in {option.name for option in by_name["install"].options}


def test_a_help_section_after_the_options_joins_the_description() -> None:
    """Symfony Console and cleo print what a command does by default under "Help:"."""
    page = parse_help(
        "Description:\n  Locks the project dependencies.\n\nUsage:\n  lock [options]\n\n"
        "Options:\n      --regenerate  Ignore existing lock file.\n\n"
        "Help:\n  The lock command reads the pyproject.toml file.\n  By default, packages that have already "
        "been added to the lock file before will not be updated.\n"
    )
    assert page.description.startswith("Locks the project dependencies.")
    assert "By default, packages that have already been added" in page.description
    assert [option.name for option in page.options] == ["--regenerate"]


def test_git_is_walked_from_its_full_listing_not_only_its_common_commands() -> None:
    """``git --help`` lists 22 common commands and points at ``git help -a`` for the rest."""
    assert GIT is not None
    result = walk_cli_help(GIT, max_depth=1)

    names = {command.name for command in result.commands}
    assert {"stash", "remote", "cherry-pick", "config", "commit"} <= names
    assert len(names) > 100
    assert "stash" in _command(result).subcommands


_FULL_LISTING_CLI = """\
#!{python}
import sys
args = sys.argv[1:]
common = (
    "Usage: tool <command>\\n\\nCommon commands:\\n  build    Build it\\n\\n"
    "See 'tool help -a' for all commands.\\n"
)
listing = "All commands\\n   build    Build it\\n   ship     Ship it\\n   audit    Audit it\\n"
if args in (["--help"], []):
    print(common)
elif args == ["help", "-a"]:
    print(listing)
elif len(args) == 2 and args[1] == "--help":
    page = "Usage: tool {{}} [--fast]\\n\\n{{}} the project.\\n\\nOptions:\\n  --fast  Go fast\\n"
    print(page.format(args[0], args[0]))
else:
    sys.exit(2)
"""


def test_a_full_listing_the_root_page_advertises_is_walked(tmp_path: Path) -> None:
    program = tmp_path / "tool"
    program.write_text(_FULL_LISTING_CLI.format(python=sys.executable), encoding="utf-8")
    program.chmod(0o755)

    result = walk_cli_help(str(program), max_depth=1)

    by_name = {command.name: command for command in result.commands}
    assert set(by_name) == {"", "build", "ship", "audit"}, [p.reason for p in result.problems]
    assert by_name[""].subcommands == ["build", "ship", "audit"]
    assert "--fast" in {option.name for option in by_name["audit"].options}


_TERMINAL_ONLY_HELP_CLI = """#!{python}
import sys
# Like clean-css-cli 5: help only for a person at a terminal; otherwise stdin is the input.
if "--help" in sys.argv and sys.stdin.isatty():
    print("Usage: minify [options] <file>")
    print()
    print("Options:")
    print("  -o, --output <file>  write the result to <file>")
    print("  --with-rebase        enable URL rebasing")
    sys.exit(0)
sys.stdout.write(sys.stdin.read().strip())
"""


def test_a_tool_that_prints_help_only_to_a_terminal_is_asked_again_with_one(tmp_path: Path) -> None:
    program = tmp_path / "minify"
    program.write_text(_TERMINAL_ONLY_HELP_CLI.format(python=sys.executable), encoding="utf-8")
    program.chmod(0o755)

    result = walk_cli_help(str(program), max_depth=0)

    assert not result.problems, result.problems
    (root,) = result.commands
    assert [option.name for option in root.options] == ["--output", "--with-rebase"]
    assert root.help_args == ("--help",)


_WAITS_ON_A_TERMINAL_CLI = """#!{python}
import sys
if "-h" in sys.argv:
    print("Usage: quiet [options]")
    print()
    print("Options:")
    print("  -h, --help   show this help")
    print("  --fast       go faster")
    sys.exit(0)
if sys.stdin.isatty():
    sys.stdin.read()  # waits for a person to type: nobody will
"""


def test_a_silent_tool_that_waits_on_a_terminal_is_left_to_the_next_help_form(tmp_path: Path) -> None:
    program = tmp_path / "quiet"
    program.write_text(_WAITS_ON_A_TERMINAL_CLI.format(python=sys.executable), encoding="utf-8")
    program.chmod(0o755)

    result = walk_cli_help(str(program), max_depth=0, timeout=2.0)

    assert not result.problems, result.problems
    (root,) = result.commands
    assert root.help_args == ("-h",) and "--fast" in {option.name for option in root.options}
