"""Entry point of the `electra` console script.

Every subcommand lives in its own module with a `register(subparsers)` function; heavy imports (torch,
onnxruntime, ...) happen inside the handlers so `electra --help` stays instant.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import traceback
from collections.abc import Sequence

from electra import __version__, logs
from electra.cli.error_form import one_form
from electra.errors import ElectraError

LOG_FORMAT_HELP = (
    "log lines on stderr as plain text (default: 'DATE TIME LEVEL LOGGER: message') or one JSON object "
    f"each; also {logs.FORMAT_ENV}"
)


_INVALID_CHOICE = re.compile(r"(.*): invalid choice: '(.*)' \(choose from (.*)\)$")


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line (exit 2) instead of the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        message = " ".join(message.split())
        fix = f"see `{self.prog} --help`"
        if choice := _INVALID_CHOICE.match(message):  # a typo: name the closest choice, not all of them
            what, given, choices = choice.groups()
            close = difflib.get_close_matches(given, re.findall(r"'([^']*)'", choices), n=1)
            message = f"{what}: invalid choice: {given!r}"
            if close:
                fix = f"did you mean {close[0]!r}? {fix}"
        self.exit(2, f"{self.prog}: error: {message} ({fix})\n")


def build_parser() -> argparse.ArgumentParser:
    from electra.cli import (
        data_cmd,
        demo_cmd,
        evaluate_cmd,
        export_cmd,
        finetune_cmd,
        plot_cmd,
        predict_cmd,
        pretrain_cmd,
        serve_cmd,
        tokenizer_cmd,
    )

    parser = _Parser(
        prog="electra",
        description="Pre-train, fine-tune, export and serve ELECTRA text encoders.",
    )
    parser.add_argument("--version", action="version", version=f"electra {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show full tracebacks on errors (also ELECTRA_DEBUG=1)"
    )
    parser.add_argument("--log-format", choices=logs.FORMATS, default=None, help=LOG_FORMAT_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    commands = (tokenizer_cmd, data_cmd, pretrain_cmd, plot_cmd, finetune_cmd, evaluate_cmd, predict_cmd)
    for module in (*commands, export_cmd, serve_cmd, demo_cmd):
        module.register(sub)
    _add_to_subcommands(parser, set())
    return parser


def _add_to_subcommands(parser: argparse.ArgumentParser, seen: set[int]) -> None:
    """--log-format after the subcommand too (`electra serve ... --log-format json`), where it is not set
    unless given, so `electra --log-format json serve ...` keeps working."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for child in action.choices.values():
            if id(child) in seen:
                continue
            seen.add(id(child))
            child.add_argument(
                "--log-format", choices=logs.FORMATS, default=argparse.SUPPRESS, help=LOG_FORMAT_HELP
            )
            _add_to_subcommands(child, seen)


def chosen_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser the arguments chose, deepest first: `electra data prepare`'s for its args."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(args, action.dest, None)
            if name in action.choices:
                return chosen_command(action.choices[name], args)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    command = chosen_command(parser, args)
    if unknown:  # argparse would blame `electra`; the options belong to the command that refused them
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    debug = args.debug or os.environ.get("ELECTRA_DEBUG", "") not in ("", "0")
    try:
        logs.configure(args.log_format)  # None: ELECTRA_LOG_FORMAT, else plain
        return int(args.handler(args) or 0)
    except ElectraError as e:
        if debug:
            traceback.print_exc()
        print(f"{command.prog}: error: {one_form(str(e), command.prog)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"{command.prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `electra ... | head` closing the pipe is not an error worth a traceback.
        return 0
    except Exception as e:  # the last line of defence: never show a bare traceback to a user
        if debug:
            traceback.print_exc()
        else:
            print(
                f"{command.prog}: internal error: {type(e).__name__}: {e} (rerun with --debug for the "
                "traceback)",
                file=sys.stderr,
            )
        return 1


if __name__ == "__main__":
    sys.exit(main())
