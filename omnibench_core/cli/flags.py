"""Task flags, converted and checked before a task starts anything.

Each flag of each ``invoke`` task names a :class:`Check`: how its text becomes a typed value
and, in words, what it accepts. :class:`FlagTask` (the Invoke task class of ``tasks.py``) runs
every check of a task before its body, so a bad value ends the command with one line per bad
flag (its name, the value given, what is allowed), exit code 1 and no traceback, before a server,
a run directory or a git call exists. Invoke itself converts nothing: a flag it converted with
``int()`` would end in a ``ValueError`` traceback inside Invoke's parser.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from invoke import Argument, Exit, Task

from ..errors import SettingsError
from ..process.cpus import check_cpus_here
from ..settings import parse_cpu_list
from ..setup.gitinfo import OPTION_LIKE
from ..store.exports import export_problem
from ..store.names import NAME_PUNCTUATION, name_problem, new_path_problem
from ..tables import full_width
from .output import error_text

# A short flag Invoke must not give a task flag: `invoke TASK -h` is that task's help.
# -h is help; "_" and "-" are never short flags (Invoke would take the "_" of slot_cpus once s, l,
# o and t are taken, and show it as "--=STRING").
RESERVED_SHORT_FLAGS = frozenset({"h", "_", "-"})
# flags of many tasks whose first letters are taken in some of them, and flags added to a task after
# its short flags were in use (Invoke gives them in order: a new one would move -n from --name)
LONG_ONLY = frozenset({"wide", "noisy_retries"})


class FlagError(SettingsError):
    """A task flag's value was refused; ``evidence`` names the flag, the value and what is allowed."""


class Refused(ValueError):
    """Raised by a check's converter: the value does not fit (the check's ``allowed`` says why)."""


@dataclass(frozen=True)
class Check:
    """How one flag's text becomes a typed value. ``describe`` says, in words, what it accepts
    (shown in the refusal and appended to the flag's ``-h`` help); a callable computes it when
    a value is refused (words from plugins, loaded only then). ``convert`` raises
    :class:`Refused` (or ``ValueError``) for a value it does not accept."""

    describe: str | Callable[[], str]
    convert: Callable[[str], Any]
    in_help: bool = True  # free text says nothing a flag's help does not

    @property
    def allowed(self) -> str:
        """What the flag accepts, in words."""
        return self.describe() if callable(self.describe) else self.describe

    def parse(self, flag: str, value: Any) -> Any:
        """The typed value of ``--flag value``; None (not given: the settings decide) stays None."""
        if value is None:
            return None
        try:
            return self.convert(str(value))
        except ValueError as exc:
            why = f" ({exc})" if isinstance(exc, Refused) and str(exc) else ""
            raise FlagError(f"--{flag} {str(value)!r} refused{why}: expected {self.allowed}",
                            evidence={"flag": f"--{flag}", "given": str(value), "allowed": self.allowed}) from None


@dataclass(frozen=True)
class Switch:
    """A boolean flag (Invoke parses ``--force`` / ``--no-force`` itself; nothing to convert)."""

    def parse(self, flag: str, value: Any) -> bool:
        """The flag as given."""
        return bool(value)


@dataclass(frozen=True)
class Many:
    """A repeatable flag (``--workload A --workload B``): each value through ``each``."""

    each: Check

    @property
    def allowed(self) -> str:
        """What each value accepts."""
        return self.each.allowed

    def parse(self, flag: str, value: Any) -> list[Any]:
        """Every value, checked."""
        return [self.each.parse(flag, v) for v in value or []]


AnyCheck = Check | Switch | Many

SWITCH = Switch()


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Refused("not a finite number")
    return value


def whole(low: int | None = None, high: int | None = None) -> Check:
    """A whole number in ``low..high`` (either end may be open)."""
    if low is not None and high is not None:
        allowed = f"a whole number from {low} to {high}"
    elif low is not None:
        allowed = f"a whole number >= {low}"
    else:
        allowed = "a whole number" + (f" <= {high}" if high is not None else "")

    def convert(text: str) -> int:
        value = int(text.strip())
        if (low is not None and value < low) or (high is not None and value > high):
            raise Refused("out of range")
        return value

    return Check(allowed, convert)


def positive_int() -> Check:
    """A whole number >= 1."""
    return whole(1)


def port() -> Check:
    """A TCP port, 1..65535."""
    return whole(1, 65535)


def number(low: float = -math.inf) -> Check:
    """A finite number ``>= low``."""

    def convert(text: str) -> float:
        value = _finite(text)
        if value < low:
            raise Refused("out of range")
        return value

    return Check(f"a number >= {low:g}", convert)


def fraction_closed(low: float = 0.0, high: float = 1.0) -> Check:
    """A number from ``low`` to ``high``, both included, e.g. a share of samples."""

    def convert(text: str) -> float:
        value = _finite(text)
        if not low <= value <= high:
            raise Refused("out of range")
        return value

    return Check(f"a number from {low:g} to {high:g}", convert)


def fraction_open(low: float = 0.0, high: float = 1.0, example: str = "") -> Check:
    """A number strictly between ``low`` and ``high``, e.g. a significance level in (0, 1)."""

    def convert(text: str) -> float:
        value = _finite(text)
        if not low < value < high:
            raise Refused("out of range")
        return value

    return Check(f"a number between {low:g} and {high:g}, both excluded" + (f", e.g. {example}" if example else ""),
                 convert)


def percent(example: str = "5") -> Check:
    """A percentage >= 0 (``5`` or ``5%``), returned as a fraction (0.05)."""

    def convert(text: str) -> float:
        value = _finite(text.strip().removesuffix("%"))
        if value < 0:
            raise Refused("negative")
        return value / 100

    return Check(f"a percentage >= 0, e.g. {example}", convert)


def threshold() -> Check:
    """A relative change as ``5%`` or ``0.05``, more than 0 and less than 10 (1000%)."""

    def convert(text: str) -> float:
        text = text.strip()
        value = _finite(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
        if not 0 < value < 10:
            raise Refused("out of range")
        return value

    return Check("a change as 5% or 0.05, more than 0 and less than 1000%", convert)


def choice(words: Sequence[str] | Callable[[], Sequence[str]], *, empty: bool = False) -> Check:
    """One of ``words`` (or of what the callable returns when the flag is checked: a plugin's
    names); ``empty``: "" (not given) is accepted too."""

    def known() -> list[str]:
        return list(words() if callable(words) else words)

    def describe() -> str:
        return "one of: " + ", ".join(known()) + (" (or nothing)" if empty else "")

    def convert(value: str) -> str:
        if (empty and value == "") or value in known():
            return value
        raise Refused()

    return Check(describe if callable(words) else describe(), convert)


def text(*, empty: bool = True) -> Check:
    """Free text (a name, a path, an address); checked further by the code that uses it."""

    def convert(value: str) -> str:
        if not empty and not value.strip():
            raise Refused("empty")
        return value

    return Check("" if empty else "a non-empty text", convert, in_help=False)


def name(what: str = "name", *, empty: bool = False) -> Check:
    """A name omnibench makes a file or folder of (a campaign's, an experiment's, a run's): one
    plain folder entry, by the one rule of :func:`.store.names.name_problem`. ``empty``: "" means
    none given (a flag whose default is ""), else it is refused."""

    return Check(f"a plain {what}: letters, digits and {' '.join(NAME_PUNCTUATION)}, not starting with - or .",
                 _refused_by(name_problem, empty))


def new_path(what: str = "folder", *, empty: bool = False) -> Check:
    """A path where omnibench makes a folder or file (``standin --out``, ``publish --out``): each
    part that does not exist yet is a name omnibench makes, held to the one rule of
    :func:`.store.names.name_problem` (:func:`.store.names.new_path_problem`)."""

    return Check(f"a {what} path whose new parts are plain names (letters, digits and {' '.join(NAME_PUNCTUATION)})",
                 _refused_by(new_path_problem, empty), in_help=False)


def export_path() -> Check:
    """``--csv``/``--json``: a file an export is written to, "" for none
    (:func:`.store.exports.export_problem`: its new folders and its name's stem held to the name rule)."""

    return Check("a file path whose new parts are plain names", _refused_by(export_problem, empty=True), in_help=False)


def _refused_by(problem_of: Callable[[str], str], empty: bool) -> Callable[[str], str]:
    """A conversion that keeps a value ``problem_of`` finds nothing wrong with and refuses the rest
    with its words; ``empty``: "" means none given and is kept."""

    def convert(value: str) -> str:
        problem = problem_of(value) if value or not empty else ""
        if problem:
            raise Refused(problem)
        return value

    return convert


def revision() -> Check:
    """A git revision given by a user: a commit, tag or branch; one starting with ``-`` would be
    read by git as an option, so it is refused."""

    def convert(value: str) -> str:
        value = value.strip()
        if not value:
            raise Refused("empty")
        if value.startswith("-"):
            raise Refused(OPTION_LIKE)
        return value

    return Check("a commit, tag or branch (not starting with -)", convert)


def library(allowed: str, convert: Callable[[str], Any]) -> Check:
    """A check made of a library parser that raises SettingsError (``parse_cpu_list``, the
    ``--revisions`` and ``--sweep`` readers): its message becomes the refusal's reason."""

    def checked(value: str) -> Any:
        try:
            return convert(value)
        except SettingsError as exc:
            raise Refused(exc.message) from None

    return Check(allowed, checked)


def cpu_set(*, here: bool = False) -> Check:
    """A CPU list as taskset writes it (``2-15,66-79``); "" is none. Kept as text, as the settings
    hold it. ``here``: CPUs this process will be pinned to, so each must be one it may use on this
    host (:func:`.process.cpus.check_cpus_here`), refused before anything starts."""
    def convert(value: str) -> str:
        cpus = parse_cpu_list(value)
        if here:
            check_cpus_here(cpus)
        return value

    return library("a CPU list as taskset writes it, e.g. 2-15,66-79" + (", of CPUs of this host" if here else ""),
                   convert)


_GPU_ID = re.compile(r"\d+|(GPU|MIG)-[0-9A-Za-z/-]+")


def gpu_ids(*, empty: bool = False) -> Check:
    """Comma-separated GPU indexes or UUIDs, each once, as CUDA_VISIBLE_DEVICES takes them."""

    def convert(value: str) -> str:
        ids = [g.strip() for g in value.split(",") if g.strip()]
        if not ids and not empty:
            raise Refused("no GPU given")
        bad = [g for g in ids if not _GPU_ID.fullmatch(g)]
        if bad:
            raise Refused(f"{bad[0]!r} is not a GPU index or UUID")
        if len(set(ids)) != len(ids):
            raise Refused("a GPU is named twice")
        return value

    return Check("GPU indexes or UUIDs, comma-separated, each once, e.g. 0,1", convert)


def gpu_index() -> Check:
    """One GPU index (``0``), kept as text as the host settings hold it."""
    index = whole(0)
    return Check(f"a GPU index, {index.allowed}", lambda v: str(index.convert(v)))


def distinct_list(what: str) -> Check:
    """A comma-separated list of distinct names (``run1,run2``); "" is none, an empty item
    (``a,,b``, ``,``) is refused rather than dropped."""

    def convert(value: str) -> list[str]:
        if not value.strip():
            return []
        items = [v.strip() for v in value.split(",")]
        if not all(items):
            raise Refused("an empty item between commas")
        twice = sorted({v for v in items if items.count(v) > 1})
        if twice:
            raise Refused(f"{', '.join(twice)} given twice")
        return items

    return Check(f"distinct {what}, comma-separated", convert)


def parse_flags(checks: Mapping[str, AnyCheck], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every flag in ``given`` through its check; one :class:`FlagError` lists every refusal
    (one line each), so a user fixes them all at once."""
    values, refused = dict(given), []
    for name, value in given.items():
        check = checks.get(name)
        if check is None:
            continue  # a flag without a check: tests/test_flags.py fails for it
        try:
            values[name] = check.parse(name.replace("_", "-"), value)
        except FlagError as exc:
            refused.append(exc)
    if len(refused) == 1:
        raise refused[0]
    if refused:
        raise FlagError("\n".join(e.message for e in refused),
                        evidence={"flags": ", ".join(e.evidence["flag"] for e in refused)})
    return values


HELP_WORDS = ("-h", "--help")


class _HelpAsked(str):
    """The value of every positional argument after ``-h`` took one's place."""


class _PositionalArgument(Argument):
    """A positional argument that lets ``invoke TASK -h`` reach the task: Invoke's parser hands
    any token, ``-h`` included, to a positional argument still missing, then refuses the
    command for the others ("did not receive required positional arguments")."""

    task: FlagTask

    def set_value(self, value: Any, cast: bool = True) -> None:
        """The value, or for ``-h``/``--help``: the task's help is asked for and every positional
        argument counts as given, so parsing ends and the task prints its help."""
        if value in HELP_WORDS:
            # A value, not a mark on the task: Invoke runs a copy of the task it parsed for.
            for arg in self.task.positional_arguments:
                if arg.value is None:
                    arg.raw_value = arg._value = _HelpAsked()
            return
        super().set_value(value, cast)


class FlagTask(Task):  # type: ignore[type-arg]  # invoke.Task is generic only in its stubs
    """An Invoke task whose flags are checked by ``checks`` (flag name -> :class:`Check`) before
    its body runs. Invoke converts no value itself (so no ``ValueError`` from its parser), each
    flag's help ends with what it accepts, and ``-h`` is the task's help: no auto short flag
    takes it, nor a positional argument."""

    def __init__(self, body: Callable[..., Any], *args: Any, checks: Mapping[str, AnyCheck] | None = None, **kwargs: Any):
        super().__init__(body, *args, **kwargs)
        self.checks: dict[str, AnyCheck] = dict(checks or {})
        self.positional_arguments: list[Argument] = []

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        """Invoke's options for one argument, with ``-h`` kept for help and no conversion."""
        opts = super().arg_opts(name, default, taken_names | RESERVED_SHORT_FLAGS)
        if name in LONG_ONLY:  # the same spelling in every task: no short flag that differs task by task
            opts["names"] = [n for n in opts["names"] if len(n) > 1]
        if opts.get("kind") not in (bool, list):
            opts["kind"] = str  # the check converts, with a message; Invoke's int() would raise
        check = self.checks.get(name)
        # Words from plugins are left out: every `invoke` command builds every task's flags.
        each = check.each if isinstance(check, Many) else check
        if isinstance(each, Check) and each.in_help and not callable(each.describe):
            opts["help"] = f"{opts.get('help', '')} [{each.allowed}]".strip()
        return opts

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        """Invoke's arguments of the task; positional ones give way to ``-h``."""
        args = super().get_arguments(ignore_unknown_help)
        self.positional_arguments = [a for a in args if a.positional]
        for arg in self.positional_arguments:
            arg.__class__ = _PositionalArgument
            arg.task = self  # type: ignore[attr-defined]
        return args

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Check every flag, then run the body; a refusal is one line per flag and exit code 1."""
        if any(isinstance(v, _HelpAsked) for v in kwargs.values()):
            raise Exit(_print_help(self), code=0)
        try:
            checked = parse_flags(self.checks, kwargs)
        except FlagError as exc:
            raise Exit(error_text(exc.message), code=1) from None
        with full_width(bool(checked.get("wide"))):  # --wide: every table and summary of the task whole
            return super().__call__(*args, **checked)


def _print_help(task: Task) -> str | None:  # type: ignore[type-arg]
    """Invoke's own ``invoke --help TASK`` for ``task``; what to run instead if that program is not the one running."""
    from invoke.main import program

    collection = getattr(program, "collection", None)
    names = [n for n in collection.task_names if collection[n].body is task.body] if collection is not None else []
    if not names:
        return f"run: invoke --help {task.name}"
    program.print_task_help(names[0])
    return None


_UNKNOWN = re.compile(r"^No idea what '(?P<token>.*)' is!$")


def parse_hints(message: str, task: str | None, task_flags: Sequence[str], task_names: Sequence[str],
                options: Callable[[], Sequence[tuple[str, str]]]) -> list[str]:
    """Hints for Invoke's bare "No idea what 'X' is!": for a flag of ``task`` it does not have,
    its close flags and, when X names a workload option (``--max-samples``), ``--opt
    WORKLOAD.max_samples=N``; for a word after a task, the task's ``--name`` when it has one; for
    an unknown task, the close task names. ``options`` lists (workload, option) pairs, called
    only when a flag is unknown."""
    import difflib

    found = _UNKNOWN.match(message)
    if not found:
        return []
    token = found["token"]
    if token.startswith("-"):
        name = token.lstrip("-").split("=", 1)[0]
        hints = [f"did you mean {' or '.join(close)}?"
                 for close in [difflib.get_close_matches(token.split("=", 1)[0], task_flags, n=3, cutoff=0.6)] if close]
        key = name.replace("-", "_")
        matches = sorted(f"--opt {w}.{o}=VALUE" for w, o in options() if o == key)
        if matches:
            hints.append(f"{name} is a workload option: pass {' or '.join(matches)} (see `invoke plugins --options`)")
        elif task:
            hints.append(f"`invoke {task} --help` lists its flags; a workload's options go in --opt WORKLOAD.OPTION=VALUE "
                         "(see `invoke plugins --options`)")
        return hints
    if task and "--name" in task_flags:
        return [f"`invoke {task}` takes no positional word: pass it as `invoke {task} --name {token}`"]
    if task:
        return [f"`invoke {task}` takes no positional word: `invoke {task} --help` lists its flags"]
    close = difflib.get_close_matches(token, task_names, n=3, cutoff=0.6)
    return ([f"did you mean {' or '.join(f'`invoke {c}`' for c in close)}?"] if close else []) + \
        ["`invoke --list` lists the tasks"]


def explain_parse_errors(program: Any, options: Callable[[], Sequence[tuple[str, str]]]) -> None:
    """Make the running Invoke program's parse errors lead somewhere: its task-parsing step is
    wrapped so that each begins with the one error prefix (:mod:`.output`) and a "No idea what
    'X' is!" gets :func:`parse_hints` appended (Invoke prints the error and exits 1 as before). Called by ``tasks.py`` when Invoke loads it; wrapping twice
    does nothing more."""
    from invoke.exceptions import ParseError

    if getattr(program.parse_tasks, "_omnibench_hints", False):
        return

    def explained(original: Callable[[], None]) -> Callable[[], None]:
        def step() -> None:
            try:
                original()
            except ParseError as exc:
                context = exc.context
                task = getattr(context, "name", None) or None
                flags = sorted(str(flag) for flag in getattr(context, "flags", {}) if str(flag).startswith("--"))
                names = sorted(program.collection.task_names) if getattr(program, "collection", None) else []
                hints = parse_hints(str(exc), task, flags, names, options)
                raise ParseError("\n".join([error_text(str(exc)), *(f"  hint: {h}" for h in hints)]),
                                 context) from None

        step._omnibench_hints = True  # type: ignore[attr-defined]
        return step

    # parse_cleanup: `invoke --help NOTATASK` is refused there
    program.parse_tasks, program.parse_cleanup = explained(program.parse_tasks), explained(program.parse_cleanup)
