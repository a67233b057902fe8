"""Errors the CLI turns into one line on stderr and an exit code, never a traceback."""


class ElectraError(Exception):
    """A failure the user can act on. Exit code 1."""

    exit_code = 1


class InputError(ElectraError):
    """Bad usage or bad input (an option, a file, a directory). Exit code 2.

    The message names the offending file or option and says how to fix it.
    """

    exit_code = 2
