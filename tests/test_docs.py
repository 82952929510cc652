"""The documentation holds: every page the README links exists, every relative link resolves, and
every `invoke` task and long flag the pages show is one that tasks.py has. A renamed flag or task
fails here instead of in a new user's terminal."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from run_helpers import REPO, load_tasks

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Invoke's own options that may stand between `invoke` and the task (`invoke -f FILE run`).
CORE_WITH_VALUE = {"-f", "--config", "-c", "--collection", "-r", "--search-root"}
CORE_FLAGS = {"--list", "-l", "--help", "-h", "--version", "-V", "--complete", "-e", "--echo", "-d", "--debug"}


@cache
def collection():
    return load_tasks("omnibench_tasks_for_docs").ns


def task_flags(name: str) -> set[str]:
    task = collection().task_with_config(name)[0]
    return {f"--{n}" for arg in task.get_arguments() for n in arg.names if len(n) > 1} | {"--help", "-h"}


def task_names() -> set[str]:
    names = set()
    for name, aliases in collection().task_names.items():
        names |= {name, *aliases}
    return names


def invoke_commands(text: str) -> list[tuple[str, list[str]]]:
    """Each `invoke TASK ...` in code blocks and inline code: (the line, its words after invoke)."""
    snippets = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    snippets += re.findall(r"`([^`\n]*\binvoke [^`\n]*)`", re.sub(r"```.*?```", "", text, flags=re.S))
    found = []
    for snippet in snippets:
        for line in snippet.splitlines():
            line = line.split(" #", 1)[0]
            for part in re.split(r"\|\||&&|;|\|", line):
                match = re.search(r"(?:^|\s|\$ )invoke\s+(.*)", part)
                if match:
                    try:
                        words = shlex.split(match.group(1))
                    except ValueError:
                        words = match.group(1).split()
                    found.append((line.strip(), words))
    return found


def shell_commands(text: str) -> list[str]:
    """Each command of a page's bash blocks as the page writes it: continued lines joined, comment
    lines and trailing comments dropped; and each ``$ `` line of its text blocks (a shown session)."""
    found = []
    for kind, block in re.findall(r"```(bash|text)\n(.*?)```", text, flags=re.S):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            if kind == "text" and not line.startswith("$ "):
                continue
            line = line.removeprefix("$ ").split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                found.append(line)
    return found


def page_command(page: str, *needles: str) -> str:
    """The one command of ``page`` (README.md, or a docs/ page by name) that holds every needle."""
    path = REPO / page if page == "README.md" else REPO / "docs" / page
    found = [c for c in shell_commands(path.read_text()) if all(n in c for n in needles)]
    assert len(found) == 1, f"{page}: {len(found)} commands hold {needles}: {found}"
    return found[0]


def run_page_command(command: str, *, paths: dict[str, str], env: dict[str, str],
                     timeout: float = 900) -> subprocess.CompletedProcess:
    """A page's command run with bash from the repository root as the page writes it, but for the
    example folders it names (``paths``: the page's /tmp/x -> this test's folder); ``env`` over this
    environment (INVOKE_OMNIBENCH_RESULTS, INVOKE_OMNIBENCH_PORT: what a user's own host differs in),
    with this python's `invoke` first on PATH, as an activated venv has it."""
    for page_path in sorted(paths, key=len, reverse=True):  # /tmp/standin-eras before /tmp/standin
        command = re.sub(rf"{re.escape(page_path)}(?![\w-])", lambda _, p=page_path: paths[p], command)
    here = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    return subprocess.run(["bash", "-c", command], cwd=REPO, env={**here, **env}, capture_output=True,
                          text=True, timeout=timeout)


def test_page_commands_are_read_whole_and_their_folders_replaced(tmp_path):
    text = ("```text\n$ invoke report\nrun0 ...\n```\n```bash\n# a comment\nPATH=/tmp/fakegpu:$PATH invoke matrix --checkout /tmp/standin-eras \\\n"
            "    --revisions c1,c3   # a note\necho /tmp/standin /tmp/standin-eras\n```\n`invoke run` inline\n")
    assert shell_commands(text) == ["invoke report", "PATH=/tmp/fakegpu:$PATH invoke matrix --checkout /tmp/standin-eras "
                                    "--revisions c1,c3", "echo /tmp/standin /tmp/standin-eras"]
    done = run_page_command(shell_commands(text)[2], paths={"/tmp/standin": "A", "/tmp/standin-eras": "B"}, env={})
    assert done.stdout == "A B\n"


def task_of(words: list[str]) -> tuple[str | None, list[str]]:
    """The task a command line names, and the words after it; None for `invoke --list` and the like."""
    i = 0
    while i < len(words) and words[i].startswith("-"):
        if words[i] in CORE_WITH_VALUE:
            i += 2
        elif words[i] in CORE_FLAGS:
            i += 1
        else:
            return None, []
    if i >= len(words):
        return None, []
    return words[i], words[i + 1:]


def test_readme_is_short_and_links_every_page():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for page in (REPO / "docs").glob("*.md"):
        assert f"docs/{page.name}" in readme, f"README does not link {page.name}"


def anchors(page: Path) -> set[str]:
    """The in-page anchors GitHub makes of a page's headings: lower case, punctuation but hyphens
    dropped, spaces as hyphens; a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        assert path.exists(), f"{page.name} links {target}, which does not exist"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{page.name} links {target}: {path.name} has no heading " \
                                            f"#{anchor}; it has {sorted(anchors(path))}"


def test_the_anchor_reader_makes_githubs_slugs(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Rounds until the answer is known\n## `invoke ab`: A/B, paired\n```\n# not a heading\n```\n"
                    "## Notes\n## Notes\n")
    assert anchors(page) == {"rounds-until-the-answer-is-known", "invoke-ab-ab-paired", "notes", "notes-1"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_task_and_flag_shown_exists(page):
    names = task_names()
    checked = 0
    for line, words in invoke_commands(page.read_text()):
        task, rest = task_of(words)
        if task is None or task.isupper() or task in ("...", "TASK"):
            continue
        assert task in names, f"{page.name}: `{line}` names task {task!r}; tasks are {sorted(names)}"
        flags = task_flags(task)
        for word in rest:
            flag = re.match(r"\[?(--[a-z][a-z0-9-]*)", word)
            if flag:
                assert flag.group(1) in flags, f"{page.name}: `{line}`: {task} has no flag {flag.group(1)}"
        checked += 1
    if page.name in ("README.md", "usage.md", "campaigns.md", "scale.md"):
        assert checked, f"{page.name} shows no invoke command: the parser missed them"


def test_every_tasks_list_line_is_a_whole_sentence():
    """`invoke --list` shows a task's first docstring line: one cut mid-phrase ("then each
    workload's and", the plugins task's) reads as broken; each ends a sentence."""
    def tasks(ns, prefix=""):
        for name, task in ns.tasks.items():
            yield prefix + name, (task.__doc__ or "").strip().splitlines()[0].rstrip()
        for sub_name, sub in ns.collections.items():
            yield from tasks(sub, f"{prefix}{sub_name}.")

    cut = [(name, first) for name, first in tasks(collection()) if not first.endswith((".", ")"))]
    assert cut == []
    assert not "then each workload's and".endswith((".", ")"))  # the line the trial saw fails here


def test_the_checker_catches_a_wrong_flag_and_task():
    """The checker itself: a made-up flag or task is found."""
    (line, words), = invoke_commands("```bash\ninvoke compare A B --fail-onn worse\n```")
    task, rest = task_of(words)
    assert task == "compare" and "--fail-onn" not in task_flags(task) and "--fail-on" in task_flags(task)
    assert task_of(["--help", "run"])[0] == "run" and task_of(["--list"])[0] is None
    assert "nosuchtask" not in task_names() and "setup.cpus" in task_names()


@pytest.mark.slow
def test_the_site_builds_with_every_page_in_its_menu(tmp_path):
    """mkdocs (the `test` extra) builds docs/ strictly: a broken link, a missing anchor or a page
    left out of mkdocs.yml's nav fails here, as it would fail the published site."""
    import subprocess
    import sys

    import yaml  # mkdocs depends on PyYAML

    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    in_menu = {page for entry in nav for page in entry.values()}
    assert in_menu == {p.name for p in (REPO / "docs").glob("*.md")}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "ab" / "index.html").is_file()


def test_every_nox_session_the_pages_show_is_one_the_noxfile_has():
    """`nox -s NAME` (and `nox -R -s NAME`) in any page names a session `nox --list` shows:
    a renamed session (or one a page invents) fails here, not in a reader's terminal."""
    import subprocess
    import sys

    listed = subprocess.run([sys.executable, "-m", "nox", "--list"], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    assert listed.returncode == 0, listed.stderr
    sessions = {m.group(1) for m in re.finditer(r"^[*-] (\w+)", listed.stdout, re.M)}
    assert {"tests", "fast", "coverage", "lint", "bench"} <= sessions, listed.stdout
    shown = {(page.name, m.group(1)) for page in PAGES
             for m in re.finditer(r"\bnox(?: -R)? -s (\w+)", page.read_text())}
    assert {name for _, name in shown} >= {"tests", "fast", "coverage"}
    assert [(page, name) for page, name in shown if name not in sessions] == []


@pytest.mark.slow
def test_usages_report_of_named_runs_runs_as_written(tmp_path):
    """usage.md's `report --runs run1,run2,run3` names the runs its own measure makes in a new root
    (after the pages' other commands run1..run3 were no one measurement, and it was refused)."""
    from run_helpers import free_port

    command = page_command("usage.md", "--runs run1,run2,run3")
    done = run_page_command(command, paths={}, env={"INVOKE_OMNIBENCH_PORT": str(free_port()),
                                                    "TMPDIR": str(tmp_path)})  # mktemp -d makes its root here
    assert len(list(tmp_path.glob("tmp.*"))) == 1  # a new root each time: the page's command runs again as written
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "these runs measured different things" not in done.stderr and "run3" in done.stdout
