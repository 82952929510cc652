"""A task made from its flags: :func:`command` gives a body ``body(c, given)`` the flags it names,
each with its check, help and default from one declaration (:mod:`.declared`), so no two tasks
restate a flag, and the body reads them checked and typed from ``given``."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from invoke import Context

from .flags import AnyCheck, FlagTask

REQUIRED = inspect.Parameter.empty  # a flag without a default: the task's positional argument


@dataclass(frozen=True)
class Flag:
    """One flag: its check (run before the body, :mod:`.flags`), its help, and the default the
    signature shows (``REQUIRED``: none, the user must give it); ``repeatable`` flags collect a list."""

    check: AnyCheck
    help: str
    default: Any = None
    repeatable: bool = False

    def but(self, **changes: Any) -> Flag:
        """The same flag with another help, default or check, for one task's words."""
        return dataclasses.replace(self, **changes)


class Given(dict[str, Any]):
    """The flags a task was given, checked and typed, by name: ``given.runs`` or ``given["runs"]``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def pick(self, *names: str) -> dict[str, Any]:
        """Those of ``names`` this task has, by name (e.g. the settings among its flags)."""
        return {name: self[name] for name in names if name in self}


Body = Callable[[Context, Given], Any]


def command(flags: Mapping[str, Flag], **options: Any) -> Callable[[Body], FlagTask]:
    """An Invoke task whose flags are ``flags``, in that order (Invoke gives short flags in the
    order of the signature), with their checks, help and defaults; the body is called as
    ``body(c, given)``. ``options`` go to ``invoke.task`` (``default=True``, say)."""

    def make(body: Body) -> FlagTask:
        def call(c: Context, *args: Any, **values: Any) -> Any:
            named = dict(zip(flags, args, strict=False))  # Invoke passes flags by name; a direct call may not
            return body(c, Given({**{n: fl.default for n, fl in flags.items()}, **named, **values}))

        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD  # in the flags' order: a required one first
        call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("c", kind)] + [inspect.Parameter(n, kind, default=fl.default) for n, fl in flags.items()])
        call.__name__, call.__qualname__, call.__doc__ = body.__name__, body.__qualname__, body.__doc__
        call.__module__ = body.__module__
        return FlagTask(call, checks={n: fl.check for n, fl in flags.items()},
                        help={n: fl.help for n, fl in flags.items()},
                        iterable=[n for n, fl in flags.items() if fl.repeatable], **options)

    return make
