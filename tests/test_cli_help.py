"""--help of the commands: every default shown, no literal "%%", a Hub id and --revision wherever a model or a
tokenizer is taken, and the defaults taken from their one source."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections.abc import Iterator

import pytest

from electra.cli.main import build_parser

# The commands whose options this test holds to the rules (the ones that take a model or a tokenizer).
COMMANDS = [
    "export",
    "finetune",
    "evaluate",
    "predict",
    "pretrain",
    "plot",
    "data prepare",
    "data info",
    "tokenizer train",
    "tokenizer show",
]
# Options that take a model or a tokenizer: a local path or a Hugging Face Hub id, with --revision beside.
HUB_OPTIONS = {
    "export": "--model",
    "finetune": "--model",
    "evaluate": "--model",
    "predict": "--model",
    "pretrain": "--init",
    "data prepare": "--tokenizer",
    "tokenizer show": "--tokenizer",
}
FLAG_ACTIONS = (
    argparse._HelpAction,
    argparse._VersionAction,
    argparse._StoreTrueAction,
    argparse._StoreFalseAction,
    argparse._StoreConstAction,
    argparse._SubParsersAction,
)


def _subparsers(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix} {name}".strip()
                yield full, sub
                yield from _subparsers(sub, full)


PARSERS = dict(_subparsers(build_parser()))


def _help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The action's help as --help prints it (argparse %-formats help strings, not descriptions)."""
    return parser._get_formatter()._expand_help(action) if action.help else ""


def _shown(default: object) -> str:
    if isinstance(default, list | tuple):
        return ",".join(map(str, default))
    return str(default)


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_default_is_shown_and_every_option_explained(command: str) -> None:
    parser = PARSERS[command]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = action.option_strings[0] if action.option_strings else action.dest
        text = _help_of(parser, action)
        assert text.strip(), f"electra {command} {name} has no help text"
        if isinstance(action, FLAG_ACTIONS) or action.default in (None, argparse.SUPPRESS):
            continue
        assert _shown(action.default) in text, (
            f"electra {command} {name}: default {action.default!r} not in {text!r}"
        )


def test_no_help_prints_a_doubled_percent_sign() -> None:
    for command, parser in [("", build_parser()), *PARSERS.items()]:
        text = parser.format_help()
        assert "%%" not in text, f"`electra {command} --help` prints %%"
    assert "10% linear warmup" in " ".join(PARSERS["finetune"].format_help().split())


@pytest.mark.parametrize("command", sorted(HUB_OPTIONS))
def test_models_and_tokenizers_take_hub_ids_with_a_revision(command: str) -> None:
    parser = PARSERS[command]
    option = _option(parser, HUB_OPTIONS[command])
    assert option.type in (None, str), "a Hub id must reach the handler as a string"
    assert "Hugging Face Hub id (e.g. google/electra-small-discriminator)" in _help_of(parser, option)
    revision = _option(parser, "--revision")
    assert revision.default is None and "branch, tag or commit" in _help_of(parser, revision)


def test_defaults_come_from_their_one_source() -> None:
    from electra.onnx.export import export_bundle
    from electra.training.data.prepare import PrepareConfig
    from electra.training.finetune.config import FinetuneConfig
    from electra.training.pretrain.config import PretrainConfig

    def config_defaults(cls: type) -> dict[str, object]:
        out = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
        return out

    sources = {
        "pretrain": config_defaults(PretrainConfig),
        "finetune": config_defaults(FinetuneConfig),
        "data prepare": config_defaults(PrepareConfig),
        "export": {
            name: p.default
            for name, p in inspect.signature(export_bundle).parameters.items()
            if p.default is not inspect.Parameter.empty
        },
    }
    for command, defaults in sources.items():
        parser = PARSERS[command]
        checked = 0
        for action in parser._actions:
            # --workers: one per core this process may use (os.sched_getaffinity), not os.cpu_count().
            if action.dest in defaults and action.default is not None and action.dest != "workers":
                assert action.default == defaults[action.dest], (command, action.dest)
                checked += 1
        assert checked >= 2, command
