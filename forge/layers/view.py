"""A verification checkout as layers: the lane's view of its tree, mounted at one
fixed path per (repository, lane) in each run's own mount namespace, so runs of the
same lane at once never meet, and what setup made names the folder every later run
sees it at (a virtualenv's shebangs, an editable install's `.pth`).

A run's upper layer starts empty (but for the view's `.git/HEAD`: the judged
commit) and is discarded when the run ends: nothing one run writes (a `.pyc`, a
`.pth`, a `.git`, a daemon's file) is seen by the next. The layers below are
read-only: the base layer (a checkout of the tree) and, when the plan has a
`setup`, the setup layer (what setup added, made once per setup, env, lane and the
contents of the lock and manifest files setup reads: `SETUP_INPUTS`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import field
from pathlib import Path

from forge.frozen import frozen
from forge.git.repo import Repository, short_sha
from forge.layers import changes, store
from forge.layers import delta as deltas
from forge.layers.below import Below
from forge.layers.mode import Mode, enter_argv, overlay_options

# The lock and manifest files whose contents decide what a setup installs.
SETUP_INPUTS = (
    "uv.lock",
    "poetry.lock",
    "pdm.lock",
    "Pipfile.lock",
    "requirements*.txt",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "package.json",
    "package-lock.json",
    "pnpm-lock.yaml",
    "yarn.lock",
    "bun.lockb",
    "Cargo.lock",
    "Cargo.toml",
    "go.mod",
    "go.sum",
    "Gemfile.lock",
    "composer.lock",
)


def inputs_hash(repo: Repository, tree: str, patterns: Sequence[str] = SETUP_INPUTS) -> str:
    """What setup reads in `tree`: the files whose names match `patterns` (a pattern
    with a `/` matches the whole path), by contents; the whole tree when none does."""
    out = repo.git("ls-tree", "-r", "-z", "--full-tree", tree)
    found = []
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        name = path.rsplit("/", 1)[-1]
        if path and any(fnmatch.fnmatchcase(path if "/" in p else name, p) for p in patterns):
            found.append(f"{meta} {path}")
    what = "\n".join(found) if found else f"tree {tree}"
    return hashlib.sha256(what.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def setup_key(setup: str, env: Sequence[tuple[str, str]], lane: str, inputs: str) -> str:
    what = json.dumps([setup, sorted(map(list, env)), lane, inputs])
    return hashlib.sha256(what.encode()).hexdigest()[:16]


@frozen
class Begun:
    """A run started in a checkout: the argv prefix its command runs under, and
    what the checkout needs to finish it."""

    enter: tuple[str, ...]
    state: object = None
    upper: Path | None = None  # where forge reads what the run wrote (a view's upper layer)


@frozen
class View:
    """One lane's layered checkout of one commit."""

    path: Path  # the mount point: what the lane's commands see
    base: Path  # the base layer (holds `tree` and `tree.git`)
    commit: str
    scratch: Path  # where runs' upper layers are made
    mode: Mode
    # The setup layer (when made or found): filled in once setup ran.
    layers: list[Path] = field(default_factory=list, compare=False)
    shared: Path | None = None  # where a new setup layer goes (None: private)
    making: Path | None = None  # a setup layer being made: the upper is kept here
    # The landed tree a shared setup layer is made from, when the judged commit is a
    # candidate with the same setup inputs (its base layer, its commit).
    landed: tuple[Path, str, Path | None] | None = None
    delta: Path | None = None  # the delta layer over the base layer (forge/layers/delta.py)

    @property
    def tree(self) -> Path:
        return self.base / "tree"

    def begin(self) -> Begun:
        run = self.making if self.making is not None else store.new_dir(self.scratch, "run")
        upper, work = run / "layer", run / "work"
        (upper / ".git").mkdir(parents=True, exist_ok=True)
        work.mkdir(exist_ok=True)
        (upper / ".git" / "HEAD").write_text(f"{self.commit}\n")
        lowers = [*self.layers, *self._below()]
        opts = overlay_options(lowers, upper, work, self.mode.user_ns)
        return Begun(tuple(enter_argv(self.mode.user_ns, opts, self.path)), run, upper)

    def _below(self) -> list[Path]:
        """The layers of the tree itself: the base layer, and its delta layer."""
        return [*([self.delta / "layer"] if self.delta else []), self.tree]

    def _changes(self, run: Path) -> list[str]:
        """What the run left in its upper layer, against the layers of the tree (a
        new file's ignore rules read where they are mounted, with a delta layer)."""
        upper, git_dir = run / "layer", self.base / "tree.git"
        changed, new = changes.walk(upper, Below(tuple(self._below())))
        if self.delta is None or not new:
            return sorted({*changed, *changes.not_ignored(self.tree, git_dir, new)})
        seen = run / "lower"
        seen.mkdir(exist_ok=True)
        opts = overlay_options(self._below(), None, None, self.mode.user_ns)
        enter = tuple(enter_argv(self.mode.user_ns, opts, seen))
        return sorted({*changed, *changes.not_ignored(seen, git_dir, new, enter)})

    def finish(self, begun: Begun, _commit: str = "") -> list[str]:
        """What the run changed (HEAD first when it moved); its upper layer is
        discarded (a setup layer being made is kept)."""
        run = Path(str(begun.state))
        upper = run / "layer"
        out = self._changes(run)
        head = changes.head_of(self.tree / ".git", upper / ".git")
        if head != self.commit:
            out.insert(0, f"HEAD (moved to {short_sha(head) or 'nothing'})")
        if self.making is None:
            store.remove(run)
        else:
            store.remove(run / "work")
        return out

    def again(self, commit: str) -> None:
        """Before a rerun: nothing to undo (each run has an upper layer of its own)."""

    def ready(self) -> bool:
        """The setup layer is in place."""
        return bool(self.layers)

    def for_setup(self) -> View:
        """The view setup runs in: the base layer alone, its upper kept."""
        root = self.scratch if self.shared is None else self.scratch.parent.parent
        base, commit = self.landed[:2] if self.landed else (self.base, self.commit)
        delta = self.landed[2] if self.landed else self.delta
        made = store.new_dir(root, "tmp")
        return View(self.path, base, commit, self.scratch, self.mode, making=made, delta=delta)

    def adopt(self, made: View) -> None:
        """Setup ran well in `made`: its upper layer becomes this view's setup layer."""
        assert made.making is not None
        store.remove(made.making / "layer" / ".git")  # the view's git files: the run's own
        layer = made.making / "layer"
        if self.shared is None:
            self.layers[:] = [layer]
            return
        self.layers[:] = [store.seal(layer, self.shared / "layer")]
        store.remove(made.making)

    def discard(self, made: View) -> None:
        if made.making is not None:
            store.remove(made.making)


@frozen
class LayerSession:
    """The layers one verification uses: pinned while it runs; its runs' folders
    (and a private setup layer) removed when it ends."""

    repo: Repository
    mode: Mode
    root: Path
    scratch: Path
    stack: contextlib.ExitStack
    candidate: bool = False

    def view(
        self,
        lane: str,
        commit: str,
        setup: tuple[str, Sequence[tuple[str, str]], Sequence[str]] | None,
    ) -> View:
        """The lane's view of `commit` (its base layer made now if need be); `setup`:
        the plan's setup command, env and setup inputs (None: no setup)."""
        tree = self.repo.tree_of(commit)
        base, delta = self._tree(commit, tree)
        mount = self.repo.worktrees_root() / ".verify" / "layered" / lane
        mount.mkdir(parents=True, exist_ok=True)
        layers: list[Path] = []
        shared = None
        if setup is not None:
            command, env, patterns = setup
            inputs = inputs_hash(self.repo, tree, patterns or SETUP_INPUTS)
            key = setup_key(command, env, lane, inputs)
            shared = self.root / "setup" / key
            if (shared / "layer").is_dir():
                self.stack.enter_context(store.pinned(shared))
                layers = [shared / "layer"]
            elif self.candidate:
                landed = self._landed(commit, inputs, patterns)
                if landed is None:
                    shared = None  # a candidate's own setup: discarded after
                return View(
                    mount,
                    base,
                    commit,
                    self.scratch,
                    self.mode,
                    layers,
                    shared,
                    landed=landed,
                    delta=delta,
                )
        return View(mount, base, commit, self.scratch, self.mode, layers, shared, delta=delta)

    def _pin(self, layer: Path) -> bool:
        """Pin the layer for this verification: whether it is still there (a clean
        that held it first has removed it)."""
        self.stack.enter_context(store.pinned(layer))
        return layer.is_dir()

    def _tree(self, commit: str, tree: str) -> tuple[Path, Path | None]:
        """The layers of `tree` (pinned): its base layer, or the latest base layer
        and a delta layer over it; a new base layer when the delta would be large."""
        found = self.root / "base" / tree
        latest = None if (found / "tree").is_dir() else store.latest_base(self.root)
        if latest is not None and self._pin(latest):
            delta = deltas.layer(self.repo, self.root, self.mode, latest, commit)
            if delta is not None and self._pin(delta):
                return latest, delta
        base = store.base_layer(self.repo, self.root, commit, tree)
        if not self._pin(base):
            base = store.base_layer(self.repo, self.root, commit, tree)  # removed meanwhile
        return base, None

    def _landed(
        self, commit: str, inputs: str, patterns: Sequence[str]
    ) -> tuple[Path, str, Path | None] | None:
        """The base layer and commit of the landed tree the candidate `commit` goes
        on (its first parent), when its setup inputs are the candidate's."""
        cp = self.repo.try_git("rev-parse", "--verify", "--quiet", f"{commit}^1")
        parent = cp.stdout.strip()
        if cp.returncode != 0 or not parent:
            return None
        tree = self.repo.tree_of(parent)
        if inputs_hash(self.repo, tree, patterns or SETUP_INPUTS) != inputs:
            return None
        base, delta = self._tree(parent, tree)
        return base, parent, delta


@contextlib.contextmanager
def session(repo: Repository, mode: Mode, *, candidate: bool = False) -> Iterator[LayerSession]:
    root = store.kind_dir(repo, mode)
    root.mkdir(parents=True, exist_ok=True)
    store.sweep(root)
    with contextlib.ExitStack() as stack:
        scratch = store.new_dir(root, "runs")
        stack.callback(store.remove, scratch)
        yield LayerSession(repo, mode, root, scratch, stack, candidate)
    store.evict(root)
