"""What forge drops never reaches a task: not its environment, not bubblewrap's
(pid 1 inside, whose `/proc/1/environ` a task can read), and the code host's tokens
not even without the sandbox. In the sandbox the person's credential files are
covered and git's global config is read without its credential helpers."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.gitkit import git
from helpers.runkit import plan_and_run, write_plan

from forge.base import sandbox

needs_sandbox = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home folder outside /tmp (which the sandbox replaces by its own), holding
    the usual credentials and a git config with a credential helper."""
    where = Path(tempfile.mkdtemp(prefix="forge-test-home-", dir="/var/tmp"))
    (where / ".ssh").mkdir()
    (where / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (where / ".config" / "gh").mkdir(parents=True)
    (where / ".config" / "gh" / "hosts.yml").write_text("oauth_token: gho_secret\n")
    for name in (".git-credentials", ".netrc"):
        (where / name).write_text("https://me:secret@example.com\n")
    (where / ".aws").mkdir()
    (where / ".aws" / "credentials").write_text("aws_secret_access_key = secret\n")
    (where / ".docker").mkdir()
    (where / ".docker" / "config.json").write_text('{"auths": {"x": {"auth": "secret"}}}\n')
    (where / ".kube").mkdir()
    (where / ".kube" / "config").write_text("token: secret\n")
    (where / "system-gitconfig").write_text(
        '[credential "https://example.org"]\n\thelper = !echo password=secret\n'
    )
    (where / ".gitconfig").write_text(
        "[user]\n\tname = Me\n[credential]\n\thelper = store\n"
        '[credential "https://example.com"]\n\thelper = !echo password=secret\n'
        '[http "https://example.com/"]\n\textraheader = AUTHORIZATION: basic secret\n'
    )
    monkeypatch.setenv("HOME", str(where))
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(where / "system-gitconfig"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(where / ".config"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def _task(run: str, *, boxed: bool) -> str:
    head = "sandbox = true\n" if boxed else ""
    return f"{head}[[task]]\nid = \"a\"\nfiles = [\".\"]\nrun = '''{run}'''\n"


def _merged(repo: Path, path: str) -> str:
    return git(repo, "show", f"forge/p-integration:{path}")


@needs_sandbox
def test_pid_1_of_the_sandbox_holds_nothing_forge_dropped(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock_dir = Path(tempfile.mkdtemp(prefix="forge-test-sock-", dir="/var/tmp"))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock_dir / "agent.sock"))
    monkeypatch.setenv("GH_TOKEN", "gho_secret")
    monkeypatch.setenv("KEPT_FOR_THE_TASK", "yes")
    run = "tr '\\0' '\\n' < /proc/1/environ > pid1.txt; env > own.txt"
    try:
        cp = plan_and_run(repo, write_plan(tmp_path, _task(run, boxed=True)))
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    for seen in (_merged(repo, "pid1.txt"), _merged(repo, "own.txt")):
        assert "KEPT_FOR_THE_TASK=yes" in seen
        assert "SSH_AUTH_SOCK" not in seen and "gho_secret" not in seen, seen
        assert "TMPDIR=/tmp" in seen


@needs_sandbox
def test_a_sandboxed_task_reads_none_of_the_persons_credentials(
    repo: Path, tmp_path: Path, home: Path
) -> None:
    run = (
        "cat ~/.ssh/id_ed25519 ~/.config/gh/hosts.yml ~/.git-credentials ~/.netrc "
        "~/.aws/credentials > read.txt 2>/dev/null; "
        "git config --global --get-all credential.helper > helper.txt; "
        "git config --global --get-regexp 'credential|extraheader' >> helper.txt; "
        "git config --global user.name > name.txt; echo x >> ~/.gitconfig || echo ro > ro.txt; "
        "for f in /tmp/.forge-home/*; do echo x >> $f || echo ro > ro2.txt; done"
    )
    cp = plan_and_run(repo, write_plan(tmp_path, _task(run, boxed=True)))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert _merged(repo, "read.txt") == ""
    assert _merged(repo, "helper.txt") == ""
    assert _merged(repo, "name.txt") == "Me"  # the rest of the config is there
    assert _merged(repo, "ro.txt") == "ro"
    assert _merged(repo, "ro2.txt") == "ro"  # nor the copy it is bound from
    assert "helper = store" in (home / ".gitconfig").read_text()  # the person's is untouched


def test_the_code_hosts_tokens_never_reach_a_task_without_the_sandbox(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GH_TOKEN", "gho_secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret")
    monkeypatch.setenv("KEPT_FOR_THE_TASK", "yes")
    plan = _task("env > own.txt", boxed=False) + "check = '''! env | grep -q _secret'''\n"
    cp = plan_and_run(repo, write_plan(tmp_path, plan))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    seen = _merged(repo, "own.txt")
    assert "KEPT_FOR_THE_TASK=yes" in seen and "_secret" not in seen, seen


@needs_sandbox
def test_in_the_sandbox_git_has_no_credential_helper_and_commits_as_the_person(
    repo: Path, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GH_TOKEN", "gho_secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret")
    # The identity from the person's config, and the machine's config read (a fake one).
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{who}_NAME")
        monkeypatch.delenv(f"GIT_{who}_EMAIL")
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM")
    config = home / ".gitconfig"
    config.write_text(config.read_text() + "[user]\n\temail = me@example.com\n")
    run = (
        "for p in .ssh .config/gh .git-credentials .netrc .aws .docker .kube; do "
        "find ~/$p -type f -size +0 2>/dev/null; done > seen.txt; "
        "cat ~/.docker/config.json ~/.kube/config >> seen.txt 2>/dev/null; "
        'echo "GH_TOKEN=$GH_TOKEN GITHUB_TOKEN=$GITHUB_TOKEN" > token.txt; '
        "git config --show-origin --get-regexp credential > helper.txt; "
        "git init -q /tmp/r && git -C /tmp/r commit -q --allow-empty -m x && "
        "git -C /tmp/r log -1 --format='%an <%ae> %cn' > author.txt"
    )
    cp = plan_and_run(repo, write_plan(tmp_path, _task(run, boxed=True)))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert _merged(repo, "seen.txt") == ""
    assert _merged(repo, "token.txt") == "GH_TOKEN= GITHUB_TOKEN="
    assert _merged(repo, "helper.txt") == ""
    assert _merged(repo, "author.txt") == "Me <me@example.com> Me"
    assert "helper" in (home / "system-gitconfig").read_text()  # the machine's is untouched
