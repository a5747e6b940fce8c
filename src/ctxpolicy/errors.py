"""The one error type of ctxpolicy: every error we raise for the user to read derives from
``CtxpolicyError``, which carries its exit code and a one-line message.

``ctxpolicy.cli.main`` maps it once: a ``CtxpolicyError`` that leaves a command is printed as
``ctxpolicy COMMAND: error: MESSAGE`` on stderr (or after the command module's own
``ERROR_PREFIX``, which may name the command's arguments: ``"ctxpolicy bundle {action}: "``) and
ends the command with its ``exit_code``. A class whose detail is a block of lines (a log's tail,
one line per reason) sets ``keeps_lines`` and is printed as it stands. Bad input is a ``UsageError``
(exit code 2) wherever it is found: a config, a policy spec, a run's plan or settings, a benchmark
that cannot be used.
A class that is also a built-in error (``class ConfigError(CtxpolicyError, ValueError)``)
keeps every ``except ValueError`` that catches it working.
"""

from __future__ import annotations

USAGE = 2  # bad input or arguments: the user's to fix
FAILURE = 1  # the work failed


class CtxpolicyError(Exception):
    """An error for the user: ``message`` is one line (unless ``keeps_lines``), ``exit_code`` the command's exit status
    (the class's, or an instance's own where one was set)."""

    exit_code: int = FAILURE
    keeps_lines: bool = False  # True: the message is printed with its lines, not joined into one

    @property
    def message(self) -> str:
        if self.keeps_lines:
            return str(self) or type(self).__name__
        lines = [line.strip() for line in str(self).splitlines() if line.strip()]
        return "; ".join(lines) or type(self).__name__


class UsageError(CtxpolicyError):
    """Bad arguments or input: exit code 2."""

    exit_code = USAGE
