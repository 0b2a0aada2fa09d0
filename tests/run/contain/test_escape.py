"""The escape corpus: misbehaving shell tasks, each either contained (nothing of the
user's repository or forge's records changed, nothing left running) or detected and
named in forge's report. Run without the sandbox, and with it where bubblewrap and
user namespaces work. The table in docs/security.md is this list: keep them in step.

`python -m pytest tests/run/contain/test_escape.py -s` prints the table.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, commit_all, git, run_forge
from helpers.runkit import write_plan

from forge.base import sandbox, seal

USER_GIT = '"$(cat .git/objects/info/alternates)/.."'  # how a task finds the user's .git


@dataclass(frozen=True)
class Case:
    id: str
    what: str
    run: str  # {repo}: the user's checkout; {mark}: a number unique to the case;
    # {ran}: a file only code run outside the sandbox, by forge, could make
    plain: str  # "contained" or the text forge's report must show
    boxed: str = "contained"
    sandbox_only: bool = False
    verify: bool = False  # the trick is the verification's, in its checkout
    cluster: bool = False  # the task runs on a cluster worker (`--cluster local:1`)


# A git dir of the task's with a filter that runs on every file forge's git reads.
EVIL = (
    "git init -q --bare {where} && git config -f {where}/config filter.x.clean 'touch {{ran}}; cat'"
    " && mkdir -p {where}/info && echo '* filter=x' > {where}/info/attributes"
)
TRICKS = {
    "commondir": EVIL.format(where=".git/evil") + " && echo $PWD/.git/evil > .git/commondir",
    "attributes": "git config filter.x.clean 'touch {ran}; cat' && mkdir -p .git/info"
    " && echo '* filter=x' > .git/info/attributes",
    "logs-link": "mkdir -p .git/logs && ln -sf {repo}/.git/HEAD .git/logs/HEAD",
    "refs-link": "ln -s {repo}/.git/refs/heads .git/refs/forge",
    "objects-link": "for a in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do for b in 0 1 2 3 4 5 6 7 8 9 a b c d e f;"
    " do rm -rf .git/objects/$a$b; ln -s {repo}/.git/hooks .git/objects/$a$b; done; done",
    "packed-refs-link": "ln -sf {repo}/.git/config .git/packed-refs",
    "config-run": "mkdir -p .git/h .git/info && printf '#!/bin/sh\\ntouch {ran}\\n' > .git/h/pre-commit"
    " && chmod +x .git/h/pre-commit && git config core.hooksPath $PWD/.git/h"
    " && git config core.fsmonitor 'touch {ran}' && git config core.sshCommand 'touch {ran}'"
    " && git config diff.external 'touch {ran}' && git config diff.x.textconv 'touch {ran}; cat'"
    " && git config filter.y.clean 'touch {ran}; cat'"
    " && echo '* diff=x filter=y' > .git/info/attributes",
}
# Written into forge's own git dir of the slot (`slot-N.git`, beside it).
OWN_DIR = (
    "d=$PWD.git; (mkdir -p $d/info $d/evil; echo '* filter=x' > $d/info/attributes;"
    " printf '[filter \"x\"]\\n\\tclean = touch {ran}; cat\\n' >> $d/config;"
    " echo $d/evil > $d/commondir) 2>/dev/null"
)
# On a cluster worker: what the task leaves in its slot's `.git`, and in forge's own
# git dir of the slot there.
ON_A_WORKER = [
    *[(name, name, trick) for name, trick in TRICKS.items()],
    ("forge-git-dir", "forge's own git dir", OWN_DIR),
]


CASES = [
    Case(
        "update-ref",
        "`git update-ref refs/heads/main HEAD~1`",
        "git update-ref refs/heads/main HEAD~1",
        "contained",
    ),
    Case("branch-f", "`git branch -f main HEAD~1`", "git branch -f main HEAD~1", "contained"),
    Case("stash", "`git stash` of an edit", "echo edit >> README.md && git stash -q", "contained"),
    Case(
        "config",
        "`git config` (identity, hooksPath, fsmonitor)",
        "git config user.name evil && git config core.hooksPath /tmp && git config core.fsmonitor 'touch {repo}/fsmonitor-ran'",
        "contained",
    ),
    Case(
        "hook",
        "a hook installed in `$(git rev-parse --git-common-dir)/hooks`",
        "h=$(git rev-parse --git-common-dir)/hooks && mkdir -p $h && printf '#!/bin/sh\\ntouch {repo}/hook-ran\\n' > $h/post-checkout && chmod +x $h/post-checkout",
        "contained",
    ),
    Case(
        "reset-hard",
        "`git checkout -B main && git reset --hard HEAD~1`",
        "git checkout -q -B main && git reset -q --hard HEAD~1",
        "contained",
    ),
    Case(
        "common-dir",
        "a file written into `$(git rev-parse --git-common-dir)/forge/`",
        "d=$(git rev-parse --git-common-dir)/forge/plans/p && mkdir -p $d && echo '{{}}' > $d/state.json",
        "contained",
    ),
    Case(
        "rm-git",
        "`rm -rf .git` in its worktree",
        "rm -rf .git",
        "broke its worktree's git directory",
        boxed="broke its worktree's git directory",
    ),
    Case(
        "index-link",
        "its `.git/index` made a link to the user's index",
        "rm -f .git/index && ln -s {repo}/.git/index .git/index",
        "contained",
    ),
    Case(
        "commondir",
        "`.git/commondir` naming a git dir whose config and `info/attributes` set a filter",
        TRICKS["commondir"],
        "contained",
    ),
    Case(
        "attributes",
        "a filter in its config applied by `.git/info/attributes`",
        TRICKS["attributes"],
        "contained",
    ),
    Case(
        "config-run",
        "`core.fsmonitor`, `core.hooksPath`, `core.sshCommand`, `diff.external`, a textconv "
        "and a filter in its config, applied by attributes in the tree and in `.git/info`",
        TRICKS["config-run"] + " && echo '* diff=x filter=y' > .gitattributes",
        "contained",
    ),
    Case(
        "gitdir-file",
        "its `.git` made a `gitdir:` file naming a git dir with a filter",
        EVIL.format(where="evil") + " && rm -rf .git && echo gitdir: $PWD/evil > .git",
        "broke its worktree's git directory",
        boxed="broke its worktree's git directory",
    ),
    Case(
        "logs-link",
        "`.git/logs/HEAD` a link to the user's `.git/HEAD`",
        TRICKS["logs-link"],
        "contained",
    ),
    Case(
        "refs-link",
        "`.git/refs/forge` a link to the user's `refs/heads`",
        TRICKS["refs-link"],
        "contained",
    ),
    Case(
        "objects-link",
        "every `.git/objects/<xx>` a link to the user's `.git/hooks`",
        TRICKS["objects-link"],
        "contained",
    ),
    Case(
        "packed-refs-link",
        "`.git/packed-refs` a link to the user's `.git/config`",
        TRICKS["packed-refs-link"],
        "contained",
    ),
    Case(
        "symlink",
        "a write through a symlink pointing into the user's checkout",
        "ln -s {repo}/README.md link && echo evil >> link; rm -f link",
        "working tree changed: README.md",
    ),
    Case(
        "abs-path",
        "a write to an absolute path in the user's checkout",
        "echo evil > {repo}/src/app.py",
        "working tree changed: src/app.py",
    ),
    Case(
        "git-C",
        "`git -C <user's repo> update-ref refs/heads/main HEAD~1`",
        "git -C {repo} update-ref refs/heads/main HEAD~1",
        "refs changed: main",
    ),
    Case(
        "verdict",
        "a PASS record copied under its own tree and a cache entry for it",
        "echo done > out.txt && echo evil > evil.txt && git add -A && "
        f"{sys.executable} {FAKES}/forge_verdict.py "
        + USER_GIT
        + "/forge/verify $(git write-tree)",
        "does not carry forge's seal",
    ),
    Case(
        "object-rewrite",
        "an existing loose object of the user's store rewritten (the same object, other bytes)",
        "o=$(git rev-parse HEAD:README.md); f={repo}/.git/objects/$(echo $o | cut -c1-2)/$(echo $o | cut -c3-);"
        " (chmod u+w $f && " + sys.executable + ' -c "import sys, zlib; p = sys.argv[1];'
        " d = zlib.decompress(open(p, 'rb').read()); open(p, 'wb').write(zlib.compress(d, 0))\" $f)"
        " 2>/dev/null",
        "object store changed: 1 object rewritten",
    ),
    Case(
        "forge-git-dir",
        "a filter, `commondir` and `info/attributes` written into forge's own git dir of its slot",
        OWN_DIR,
        "contained",
    ),
    *[
        Case(
            f"verify-{name}",
            f"the verification: {name} (as above) in its checkout",
            trick,
            "contained",
            verify=True,
        )
        for name, trick in TRICKS.items()
    ],
    *[
        Case(
            f"cluster-{name}",
            f"on a cluster worker: {label} (as above) in its slot",
            trick,
            "contained",
            cluster=True,
        )
        for name, label, trick in ON_A_WORKER
    ],
    Case(
        "verify-gitdir-file",
        "the verification: its checkout's `.git` made a `gitdir:` file",
        EVIL.format(where=".git/evil") + " && mv .git/evil ../evil 2>/dev/null;"
        " rm -rf .git && echo gitdir: /nonexistent > .git",
        "changed the checkout: HEAD",
        boxed="changed the checkout: HEAD",
        verify=True,
    ),
    Case(
        "daemon",
        "a daemon: `setsid -f env -i sleep` (drops forge's tag)",
        "setsid -f env -i sleep {mark} > /dev/null 2>&1",
        "contained",
    ),
    Case(
        "daemon-cd",
        "a daemon that also leaves its folder: `cd / && setsid -f env -i sleep`",
        "(cd / && setsid -f env -i sleep {mark} > /dev/null 2>&1)",
        "escapes (no cgroup v2 here)",
        sandbox_only=True,
    ),
]


def _mark(case: Case) -> str:
    return str(31000 + CASES.index(case))


def _user_side(repo: Path) -> dict[str, object]:
    """Everything of the user's a task must not change, and forge's verdict records."""
    verify = repo / ".git" / "forge" / "verify"
    hooks = repo / ".git" / "hooks"
    key = seal.key_dir() / "key"
    return {
        "key": _sha(key),
        "HEAD": _sha(repo / ".git" / "HEAD"),
        "objects": _objects(repo),
        "refs": git(
            repo,
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/heads/main",
            "refs/stash",
        ),
        "head": git(repo, "symbolic-ref", "HEAD"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "index": hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest(),
        "config": (repo / ".git" / "config").read_text(),
        "hooks": sorted(p.name for p in hooks.iterdir()) if hooks.exists() else [],
        "records": sorted(p.name for p in verify.rglob("forged*")) if verify.exists() else [],
    }


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "absent"


def _objects(repo: Path) -> dict[str, str]:
    """Each object file of the user's store by its content's hash."""
    store = repo / ".git" / "objects"
    return {
        str(p.relative_to(store)): _sha(p)
        for p in store.rglob("*")
        if p.is_file() and p.parent.name != "info"
    }


def _alive(mark: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd[:2] == [b"sleep", mark.encode()]:
            found.append(int(pid))
    return found


def _run_case(case: Case, repo: Path, tmp_path: Path, *, boxed: bool) -> tuple[str, str]:
    if case.cluster:
        pytest.importorskip("distributed")
    (repo / "README.md").write_text("# test repo\nsecond\n")
    commit_all(repo, "second")  # HEAD~1 exists
    ran = tmp_path / "ran"  # outside the slot: in the sandbox, only forge could write it
    trick = case.run.format(repo=repo, mark=_mark(case), ran=ran)
    verify = f"verify = '''{trick}; true'''\n" if case.verify else 'verify = "test ! -e evil.txt"\n'
    task = "echo done > out.txt" if case.verify else f"{trick}; echo done > out.txt"
    plan = write_plan(
        tmp_path,
        verify
        + ("sandbox = true\n" if boxed else "")
        + '[[task]]\nid = "a"\nfiles = ["."]\n'
        + f"run = '''{task}'''\n",
    )
    assert seal.key() is not None  # made now, so that a run that rewrote it shows
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    if case.id == "verdict":  # a genuine PASS record the task can copy
        assert run_forge(repo, "verify", "--plan", "p", "HEAD").returncode == 0
    before = _user_side(repo)
    cp = run_forge(repo, "run", *(["--cluster", "local:1"] if case.cluster else []))
    report = cp.stdout + cp.stderr
    after = _user_side(repo)
    # Objects the run added are its own; those that were there must be as they were.
    had, has = before["objects"], after["objects"]
    assert isinstance(had, dict) and isinstance(has, dict)
    after["objects"] = {k: has.get(k, "absent") for k in had}
    mark = _mark(case)
    left = _alive(mark)
    for pid in left:
        os.kill(pid, 9)
    expect = case.boxed if boxed else case.plain
    if expect == "contained":
        assert after == before, report
        assert "were not touched" in cp.stdout, report
        assert not left, f"the daemon survived: {left}"
        assert not (repo / "hook-ran").exists() and not (repo / "fsmonitor-ran").exists()
        assert not ran.exists(), "forge ran what the task left"
        # the forged verdict's work fails its verification, as it should: exit 5
        assert cp.returncode == (5 if case.id == "verdict" else 0), report
    else:
        assert expect in report, report
        assert not ran.exists(), "forge ran what the task left"
        users = [k for k in before if k != "records" and before[k] != after[k]]
        assert not users or "were not touched" not in cp.stdout, report
    return case.id, expect


# A cluster case without the sandbox is slow (a scheduler and a worker each time); the
# same case runs in the sandbox by default, and every case runs here without one.
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.slow) if c.cluster else c
        for c in CASES
        if not c.sandbox_only
    ],
    ids=lambda c: c.id,
)
def test_escape_without_sandbox(case: Case, repo: Path, tmp_path: Path) -> None:
    _run_case(case, repo, tmp_path, boxed=False)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_escape_in_the_sandbox(case: Case, repo: Path, tmp_path: Path) -> None:
    missing = sandbox.unavailable()
    if missing:
        print(f"skipped: {missing}")
        pytest.skip(missing)
    _run_case(case, repo, tmp_path, boxed=True)


def test_print_the_table() -> None:
    """docs/security.md's table, from the cases above (`-s` shows it)."""
    lines = [
        "| misbehaving task | without sandbox | with `sandbox = true` |",
        "| --- | --- | --- |",
    ]
    for c in CASES:
        plain = "escapes" if c.sandbox_only else c.plain
        lines.append(f"| {c.what} | {_say(plain)} | {_say(c.boxed)} |")
    print("\n".join(lines))
    assert len(CASES) >= 12


def _say(expect: str) -> str:
    return expect if expect in ("contained", "escapes") else f'detected: "{expect}"'
