"""The command line: parse, call the core, render, map errors to exit codes. Only this
package knows typer: `kit` holds the app and what its commands share, each other module
a group of commands (imported here, so that they register)."""

from __future__ import annotations

import copy
import gc
import sys
from typing import NoReturn

import typer

from forge.cli import doctor, draft, forget, pr, tests, views, work
from forge.cli.kit import app, emit_json, emitted
from forge.errors import ExitCode, ForgeError

__all__ = ["app", "doctor", "draft", "forget", "main", "pr", "tests", "views", "work"]


def main(argv: list[str] | None = None) -> NoReturn:
    from forge.base.text import guard_standard_streams

    guard_standard_streams()
    args = sys.argv[1:] if argv is None else argv
    try:
        _app_for(args)(args=argv, prog_name="forge")
    except ForgeError as exc:
        _fail(exc.message or type(exc).__name__, exc.code, as_json="--json" in args)
    except KeyboardInterrupt:
        _fail("interrupted", ExitCode.INTERRUPTED, as_json="--json" in args)
    except OSError as exc:
        from forge.base.files import DiskFull, is_full

        if not is_full(exc):
            raise
        full = DiskFull(exc, resume=f"`forge {args[0]}`" if args else "it")
        _fail(full.message, full.code, as_json="--json" in args)
    finally:
        # The process ends: no last collection of all it made (25-40 ms); exit handlers run.
        gc.freeze()
    sys.exit(ExitCode.OK)


def _app_for(args: list[str]) -> typer.Typer:
    """The one command `args` name, alone (typer reads the parameters of every command
    it is given: ~15 ms a call), or the whole app (help, version, hooks, a typo)."""
    for info in app.registered_commands if args and not args[0].startswith("-") else []:
        if str(info.name or getattr(info.callback, "__name__", "")).replace("_", "-") == args[0]:
            one = copy.copy(app)
            one.registered_commands, one.registered_groups = [info], []
            return one
    return app


def _fail(message: str, code: ExitCode, *, as_json: bool) -> NoReturn:
    """One `forge: ` line a person reads on stderr; with --json also the failure as
    JSON on stdout, so a script that parses stdout gets an answer, not nothing."""
    if as_json and not emitted:
        emit_json({"error": message, "exit_code": int(code)})
    for line in message.splitlines():
        sys.stderr.write(f"forge: {line}\n")
    sys.exit(int(code))
