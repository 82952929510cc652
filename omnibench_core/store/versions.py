"""The format version every stored file carries, checked on load: an older one is migrated step
by step to the current one, a newer or unknown one is refused with the file and version named."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import RunFileError
from ..jsonio import read_json

# One step: the JSON of format N made into the JSON of format N + 1.
Migration = Callable[[dict[str, Any]], dict[str, Any]]


class Unmigratable(Exception):
    """A migration's refusal: the old file holds what its format had no field for (an edit by hand).
    :func:`current` turns it into the reader's error, naming the file, the field and the format."""

    def __init__(self, field: str, why: str):
        super().__init__(why)
        self.field, self.why = field, why


def current(path: Path, what: str, data: dict[str, Any], *, version: object, reads: int,
            migrations: Mapping[int, Migration], error: type[RunFileError] = RunFileError) -> dict[str, Any]:
    """``data`` (of format ``version``) as JSON of format ``reads``.

    ``migrations[n]`` turns format ``n`` into ``n + 1``; a format below ``reads`` without a chain
    of steps up, above ``reads``, or not a whole number is ``error``, naming the file and format.
    """
    if isinstance(version, int) and not isinstance(version, bool) and 0 < version <= reads:
        n = version
        while n < reads and n in migrations:
            try:
                data, n = migrations[n](dict(data)), n + 1
            except Unmigratable as exc:
                raise error(f"the {what} {path} has format {version!r} and field {exc.field!r}: {exc.why}",
                            evidence={"file": str(path), "field": exc.field, "format": repr(version)},
                            hint=f"remove {exc.field!r} from the file, or move the file aside to start again") from None
        if n == reads:
            return {**data, "format": reads}
    newer = isinstance(version, int) and not isinstance(version, bool) and version > reads
    raise error(f"the {what} {path} has format {version!r}; this omnibench reads format {reads}"
                + (" and migrates older ones" if migrations else ""),
                evidence={"file": str(path), "field": "format", "format": repr(version)},
                hint=("it was written by a newer omnibench: use that one (or upgrade this one)" if newer else
                      "use the omnibench that wrote it") + ", or move the file aside to start again")


def read_object(path: Path, what: str, *, reads: int, migrations: Mapping[int, Migration], hint: str) -> dict[str, Any]:
    """The JSON object of a run file that has always been one, of format ``reads`` (one without a
    ``format`` field is format 1); an unreadable file, another JSON value or a newer format is a
    RunFileError naming the file (``hint``: what to do when it cannot be read)."""
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise RunFileError(f"cannot read the {what} {path}: {type(exc).__name__}: {exc}", evidence={"file": str(path)},
                           hint=hint) from exc
    if not isinstance(data, dict):
        raise RunFileError(f"the {what} {path} is not valid: it must be an object, not {type(data).__name__}",
                           evidence={"file": str(path), "field": "(top level)"}, hint=hint)
    return current(path, what, data, version=data.get("format", 1), reads=reads, migrations=migrations)
