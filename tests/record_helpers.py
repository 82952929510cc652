"""Edits of a good record file, each of which its loader must refuse naming the field."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

Edit = Callable[[dict[str, Any]], object]


def assert_each_edit_refused(path: Path, good: Mapping[str, Any], cases: Mapping[str, tuple[Edit, str]],
                             load: Callable[[Path], object], error: type[Exception], *,
                             names_the_file: bool = False) -> None:
    """For each case, write ``good`` with its edit to ``path``: ``load`` raises ``error`` whose text
    holds the case's words (and ``path``, with ``names_the_file``)."""
    for name, (edit, words) in cases.items():
        data = json.loads(json.dumps(good))
        edit(data)
        path.write_text(json.dumps(data))
        with pytest.raises(error) as err:
            load(path)
        assert words in str(err.value), (name, str(err.value))
        assert not names_the_file or str(path) in str(err.value), (name, str(err.value))
