"""Workload options: ``--opt WORKLOAD.KEY=VALUE`` read against each workload's schema.

A workload declares its options as :class:`~omnibench_core.records.Option` records (name,
type, default, range, help). This module turns the user's strings into typed values, checks
types, ranges and choices, and refuses a bad value with a :class:`SettingsError` that names the
option, the value, what it must be and what to do. ``api.run`` calls :func:`parse` before the
target is prepared or a run directory exists, so no bad value ever starts a server.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

from ..errors import SettingsError
from .run import OPTION_TYPES, Option, OptionValue, Workload
from .user_files import UserFileError, read_user_file

OPTION_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_TYPE_WORDS = {int: "an integer", float: "a finite number", bool: "true or false (1/0, yes/no)", str: "text"}
T = TypeVar("T")
LISTED_BY = "`invoke plugins` lists every workload option with its type, range and default"


class OptionValueError(ValueError):
    """A value does not fit an option; the text says why (used inside this module and by clients)."""


# -- describing an option ---------------------------------------------------------------------
def type_text(opt: Option) -> str:
    """The option's type as ``invoke plugins`` shows it: ``int``, ``float``, ``bool``, ``str``
    or ``choice``."""
    return "choice" if opt.choices else opt.type.__name__


def range_text(opt: Option) -> str:
    """The values the option accepts beyond its type, e.g. ``>= 1``, ``> 0``, ``auto|native``."""
    if opt.choices:
        return "|".join(opt.choices)
    parts = []
    if opt.min is not None:
        parts.append(f"{'>' if opt.min_exclusive else '>='} {format_value(opt.min)}")
    if opt.max is not None:
        parts.append(f"{'<' if opt.max_exclusive else '<='} {format_value(opt.max)}")
    return " and ".join(parts)


def expectation(opt: Option) -> str:
    """What a value must be, in words: ``an integer >= 1, or empty to leave it unset (all samples)``."""
    if opt.choices:
        text = f"one of {', '.join(opt.choices)}"
    else:
        text = _TYPE_WORDS.get(opt.type, opt.type.__name__)
        bounds = range_text(opt)
        if bounds:
            text += f" {bounds}"
    if opt.optional:
        text += f", or empty to leave it unset ({opt.unset or 'not set'})"
    return text


def default_text(opt: Option) -> str:
    """The default as a user would type it; an unset default says what unset means."""
    if opt.default is None:
        return f"unset: {opt.unset}" if opt.unset else "unset"
    return format_value(opt.default) if opt.default != "" else '""'


def format_value(value: OptionValue) -> str:
    """A typed value as a command-line argument: ``2.0`` as ``2``, ``True`` as ``true``, None as ``""``.

    Integral floats lose their ``.0`` so argv stays as the runbook writes it (``--video-fps 2``).
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


# -- checking values --------------------------------------------------------------------------
def convert(opt: Option, text: str) -> OptionValue:
    """``text`` (as typed after ``=``) as the option's typed value; raises OptionValueError."""
    raw = text.strip()
    if raw == "" and opt.optional:
        return None
    value: OptionValue
    if opt.type is bool:
        if raw.lower() not in _TRUE + _FALSE:
            raise OptionValueError(f"{text!r} is not a boolean")
        value = raw.lower() in _TRUE
    elif opt.type is int:
        try:
            value = int(raw)
        except ValueError:
            raise OptionValueError(f"{text!r} is not an integer") from None
    elif opt.type is float:
        try:
            value = float(raw)
        except ValueError:
            raise OptionValueError(f"{text!r} is not a number") from None
    else:
        value = text
    value = check(opt, value)
    if opt.file and value is not None:
        try:  # read now: a FIFO, a device, a folder or bytes that are not UTF-8 never reach a started server
            read_user_file(str(value))
        except UserFileError as exc:
            raise OptionValueError(str(exc)) from None
    return value


def check(opt: Option, value: Any) -> OptionValue:
    """A typed value checked against the option (type, finiteness, range, choices); returns it,
    an int made a float for a float option. Raises OptionValueError."""
    if value is None:
        if opt.optional:
            return None
        raise OptionValueError("it cannot be unset")
    if opt.type is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, opt.type) or (opt.type is int and isinstance(value, bool)):
        wanted = _TYPE_WORDS.get(opt.type, opt.type.__name__)
        raise OptionValueError(f"{value!r} is a {type(value).__name__}, not {wanted}")
    if isinstance(value, float) and not math.isfinite(value):
        raise OptionValueError(f"{value!r} is not a finite number")
    if opt.choices and value not in opt.choices:
        raise OptionValueError(f"{value!r} is not one of {', '.join(opt.choices)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low = opt.min is not None and (value <= opt.min if opt.min_exclusive else value < opt.min)
        high = opt.max is not None and (value >= opt.max if opt.max_exclusive else value > opt.max)
        if low or high:
            raise OptionValueError(f"{format_value(value)} is out of range ({range_text(opt)})")
    return cast(OptionValue, value)  # one of OPTION_TYPES: checked above


def refusal(workload: str, opt: Option, text: str, reason: str, given: str = "") -> SettingsError:
    """The error for a bad value: the option, the value, its type and range, and what to do.

    ``given`` is how the user wrote it when that was not ``--opt`` (e.g. ``--client x``).
    """
    key = f"{workload}.{opt.name}"
    return SettingsError(
        f"{given or f'option {key}={text}'} is refused: {reason}",
        evidence={"option": key, "value": repr(text), "type": type_text(opt), "range": range_text(opt) or "any",
                  "must be": expectation(opt), "default": default_text(opt), "meaning": opt.help or "-"},
        hint=f"give {key} a value that is {expectation(opt)}, or drop it for the default; {LISTED_BY}",
    )


# -- a workload's options ---------------------------------------------------------------------
def defaults(schema: Sequence[Option]) -> dict[str, OptionValue]:
    """``{name: default}`` of a schema (what a run gets without ``--opt``)."""
    return {opt.name: opt.default for opt in schema}


def by_name(schema: Sequence[Option]) -> dict[str, Option]:
    """``{name: Option}``: for clients that read their defaults and help from the schema."""
    return {opt.name: opt for opt in schema}


def default_of(schema: Mapping[str, Option], name: str, kind: type[T]) -> T:
    """The default of option ``name``, checked to be a ``kind`` (for typed dataclass defaults)."""
    value = schema[name].default
    if not isinstance(value, kind):
        raise TypeError(f"option {name!r} has default {value!r}, not a {kind.__name__}")
    return value


def schema_problems(schema: Sequence[Option]) -> list[str]:
    """What is wrong with a schema a plugin declared (empty when it is sound)."""
    problems, seen = [], set()
    for opt in schema:
        if not isinstance(opt, Option):
            problems.append(f"{opt!r} is not an omnibench_core.records.Option")
            continue
        if not OPTION_NAME_RE.match(opt.name):
            problems.append(f"option name {opt.name!r} is not lower-case letters, digits and '_'")
        if opt.name in seen:
            problems.append(f"option {opt.name!r} is declared twice")
        seen.add(opt.name)
        if opt.type not in OPTION_TYPES:
            problems.append(f"option {opt.name!r} has type {opt.type!r}; use int, float, str or bool")
            continue
        if opt.choices and opt.type is not str:
            problems.append(f"option {opt.name!r} has choices but type {opt.type.__name__}; choices are str")
        if (opt.min is not None or opt.max is not None) and opt.type not in (int, float):
            problems.append(f"option {opt.name!r} has a range but type {opt.type.__name__}")
        if opt.file and (opt.type is not str or opt.choices or opt.default is not None):
            problems.append(f"option {opt.name!r} names a file: it must be a str option with no choices and no default")
        try:
            check(opt, opt.default)
        except OptionValueError as exc:
            problems.append(f"option {opt.name!r} has a default that does not fit it: {exc}")
    return problems


def parse(pairs: Sequence[str], workloads: Sequence[Workload], client: str | None = None
          ) -> dict[str, dict[str, OptionValue]]:
    """``["seedtts.max_concurrency=8", ...]`` as checked, typed values over each workload's defaults.

    ``client`` sets the ``client`` option of every workload that has one (``--client``). Any bad
    pair or value raises :class:`SettingsError`; nothing is started here.
    """
    schemas = {w.name: by_name(w.options) for w in workloads}
    values: dict[str, dict[str, OptionValue]] = {w.name: defaults(w.options) for w in workloads}
    if client is not None:
        having = [name for name, schema in schemas.items() if "client" in schema]
        if not having:
            raise SettingsError("--client was given but no workload of this run has a client choice")
        for name in having:
            values[name]["client"] = _read(name, schemas[name]["client"], client, f"--client {client}")
    for pair in pairs:
        key, sep, text = pair.partition("=")
        workload, dot, name = key.strip().partition(".")
        if not sep or not dot:
            raise SettingsError(f"cannot read option {pair!r}", hint="write options as WORKLOAD.KEY=VALUE")
        if workload not in schemas:
            raise SettingsError(f"option {pair!r} names workload {workload!r}, which is not in this run",
                                hint=f"workloads in this run: {', '.join(schemas)}")
        if name not in schemas[workload]:
            raise unknown_option(f"workload {workload!r}", name, schemas[workload], f"{workload}.")
        values[workload][name] = _read(workload, schemas[workload][name], text)
    return values


def parse_pairs(owner: str, schema: Sequence[Option], pairs: Sequence[str], flag: str) -> dict[str, OptionValue]:
    """``["KEY=VALUE", ...]`` given with ``flag`` (``--engine-opt``) as checked, typed values over
    ``schema``'s defaults, for the record named ``owner`` (an engine); a bad pair raises SettingsError."""
    known = by_name(schema)
    values = defaults(schema)
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SettingsError(f"cannot read {flag} {pair!r}", hint=f"write it as {flag} KEY=VALUE")
        if key not in known:
            raise unknown_option(repr(owner), key, known)
        values[key] = _read(owner, known[key], text, f"{flag} {pair}")
    return values

def unknown_option(owner: str, name: str, known: Iterable[str], prefix: str = "") -> SettingsError:
    """The refusal of option ``name`` that ``owner`` does not have: the known ones as evidence, and
    the close names first in the hint (``max_sampels`` -> did you mean ``seedtts.max_samples``?)."""
    import difflib  # only on this error path

    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    guess = f"did you mean {' or '.join(prefix + c for c in close)}? " if close else ""
    return SettingsError(f"{owner} has no option {name!r}", evidence={"known options": ", ".join(names) or "none"},
                         hint=guess + LISTED_BY)


def _read(workload: str, opt: Option, text: str, given: str = "") -> OptionValue:
    try:
        return convert(opt, text)
    except OptionValueError as exc:
        raise refusal(workload, opt, text, str(exc), given) from None


def argparse_type(opt: Option) -> Any:
    """A converter for ``argparse``'s ``type=``: the same checks as ``--opt``, so a client run by
    hand refuses what ``invoke run`` refuses."""

    def read(text: str) -> OptionValue:
        try:
            return convert(opt, text)
        except OptionValueError as exc:
            raise argparse.ArgumentTypeError(f"{exc}; it must be {expectation(opt)}") from None

    read.__name__ = opt.type.__name__  # argparse names the type in its message
    return read


def add_argument(parser: argparse.ArgumentParser, opt: Option) -> None:
    """``--max-new-tokens`` and the like for a client: the flag is the option's name with dashes;
    default, type, range and help come from the option."""
    parser.add_argument(f"--{opt.name.replace('_', '-')}", type=argparse_type(opt), default=opt.default,
                        help=f"{opt.help} (default: {default_text(opt)}; {expectation(opt)})")


def rows(workload: str, schema: Sequence[Option]) -> list[tuple[str, str, str, str, str, str]]:
    """One ``(workload, name, type, default, range, help)`` row per option, for listings."""
    return [(workload, o.name, type_text(o), default_text(o), range_text(o) or "-", o.help or "-") for o in schema]

