"""Generated repositories: N small files in nested folders, one commit on `main`.

Files are written from Python and committed with one `git add -A && git commit`,
so 50k files take seconds, not minutes.
"""

from __future__ import annotations

from pathlib import Path

from kit import Context, git

FILES_PER_DIR = 50
DIRS_PER_PARENT = 20


def file_path(i: int) -> str:
    """The i-th file: src/pNN/dNN/fNNNNN.py (50 files a folder, 20 folders a parent)."""
    d = i // FILES_PER_DIR
    return f"src/p{d // DIRS_PER_PARENT:03d}/d{d % DIRS_PER_PARENT:02d}/f{i:05d}.py"


def generate(dest: Path, files: int) -> Path:
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    made: set[Path] = set()
    for i in range(files):
        path = dest / file_path(i)
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_text(f'"""Module {i}."""\n\nVALUE_{i} = {i}\n')
    (dest / "README.md").write_text(f"# generated repository ({files} files)\n")
    (dest / ".gitignore").write_text("__pycache__/\n")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "--no-verify", "-m", f"{files} generated files")
    return dest


def repo(ctx: Context, files: int) -> Path:
    """The session's repository of `files` files, generated on first use."""
    if files not in ctx.repos:
        dest = ctx.root / "repos" / f"r{files}"
        ctx.log(f"  generating a repository of {files} files ...")
        ctx.repos[files] = generate(dest, files)
    return ctx.repos[files]
