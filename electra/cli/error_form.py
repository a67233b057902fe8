"""The one form of an error line: `electra <command>: error: <what> (<what to do>)`.

Messages are written where the error is found, as `<what> (<what to do>)` or, in many older ones,
`<what>; <what to do>`; this puts both in the one form, and gives a message that names no fix the command's
help as its fix, so no line leaves a user without a next step.
"""

from __future__ import annotations

_OPEN, _CLOSE = "([{", ")]}"


def _depths(message: str) -> list[int]:
    """The bracket depth before each character (quotes and backticks count as brackets of their own)."""
    depths, depth, quote = [], 0, ""
    for ch in message:
        depths.append(depth + (1 if quote else 0))
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "`":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
    return depths


def _ends_with_a_fix(message: str) -> bool:
    """Whether the message ends in a parenthesised part opened at the top level (`<what> (<fix>)`)."""
    if not message.endswith(")"):
        return False
    depths = _depths(message)
    opened = [i for i, ch in enumerate(message) if ch == "(" and depths[i] == 0]
    return bool(opened) and opened[-1] > 0 and message[opened[-1] - 1] == " "


def one_form(message: str, command: str) -> str:
    """`message` as `<what> (<what to do>)`; `command` ("electra serve") names the help to fall back on."""
    message = " ".join(message.split())  # one line, whatever the message held
    if _ends_with_a_fix(message):
        return message
    depths = _depths(message)
    cuts = [i for i in range(len(message) - 1) if message[i : i + 2] == "; " and depths[i] == 0]
    if cuts:
        what, fix = message[: cuts[-1]], message[cuts[-1] + 2 :]
        return f"{what} ({fix})"
    return f"{message} (see `{command} --help`)"
