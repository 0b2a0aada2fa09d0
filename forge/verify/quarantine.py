"""Which failing tests blame nobody: those quarantined on evidence or by word.

A test that both passed and failed on one tree (forge/verify/testdb.py) is flaky.
With `quarantine = "auto"` (the default) a flaky test is quarantined: it still
runs and is reported, but its failure fails no verification and blames no task.
It is released after it passes on `release_after` landed trees in a row (after
its last failure), or by a person (`forge tests --release`); a person may also
quarantine a test (`forge tests --quarantine`), and a team names tests in
forge.toml (`[tests] quarantine = [...]`). `quarantine = "off"` turns the
evidence off; people's and the team's word still hold.
"""

from __future__ import annotations

from collections.abc import Iterable

from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.plan.lanes import DEFAULT_RELEASE_AFTER, TestsWord
from forge.plan.repo_config import VerifyConfig, load_repo_config
from forge.verify import testdb


@frozen
class Policy:
    auto: bool  # quarantine on evidence
    release_after: int
    team: frozenset[str]  # forge.toml's [tests] quarantine


def team_word(repo: Repository) -> TestsWord:
    """forge.toml's `[tests]` (an unreadable forge.toml: no word)."""
    try:
        return load_repo_config(repo.root, read_agents=False).tests
    except ForgeError:
        return TestsWord()


def policy(repo: Repository, config: VerifyConfig | None) -> Policy:
    """How `config`'s failing tests are judged: forge.toml's `[tests]` as read
    with `config` (a run's, at its start), else as it reads now."""
    word = config.team if config is not None and config.team is not None else team_word(repo)
    mode = (config.quarantine if config else None) or word.mode or "auto"
    release = (config.release_after if config else None) or word.release_after
    return Policy(
        auto=mode == "auto",
        release_after=release or DEFAULT_RELEASE_AFTER,
        team=frozenset(word.quarantine),
    )


@frozen
class Standing:
    flaky: bool  # passed and failed on one tree
    quarantined: bool
    why: str  # "flaky", "a person's word", "forge.toml", "released", ""


def standings(
    repo: Repository, pol: Policy, lane: str, tests: Iterable[str]
) -> dict[str, Standing]:
    """Each test's standing in `lane`."""
    tests = list(dict.fromkeys(tests))
    flaky = testdb.flaky_since(repo.state, lane)
    said = testdb.words(repo.state)
    evidence = [t for t in tests if (lane, t) in flaky]
    passes = testdb.passes_on_landed_since_failure(repo.state, lane, evidence) if pol.auto else {}
    out: dict[str, Standing] = {}
    for test in tests:
        seen = flaky.get((lane, test))
        word, at = said.get(test, ("", 0.0))
        if word == "quarantine":
            out[test] = Standing(seen is not None, True, "a person's word")
        elif test in pol.team:
            out[test] = Standing(seen is not None, True, "forge.toml")
        elif seen is None or not pol.auto:
            out[test] = Standing(seen is not None, False, "")
        elif word == "release" and at > seen:
            out[test] = Standing(True, False, "released by a person")
        elif passes.get(test, 0) >= pol.release_after:
            n = pol.release_after
            out[test] = Standing(True, False, f"released after {n} pass{'es' * (n != 1)}")
        else:
            out[test] = Standing(True, True, "flaky")
    return out


def quarantined(
    repo: Repository, config: VerifyConfig | None, lane: str, tests: Iterable[str]
) -> frozenset[str]:
    """Which of `tests` (failing in `lane`) are quarantined now."""
    pol = policy(repo, config)
    return frozenset(t for t, s in standings(repo, pol, lane, tests).items() if s.quarantined)


def held(repo: Repository, config: VerifyConfig | None, lane: str) -> dict[str, str]:
    """Every test quarantined in `lane` now, and why (`quarantined (flaky)`,
    `quarantined (a person's word)`, `quarantined (forge.toml)`)."""
    pol = policy(repo, config)
    said = testdb.words(repo.state)
    named = [t for t, (word, _at) in said.items() if word == "quarantine"]
    flaky = [t for (ln, t) in testdb.flaky_since(repo.state, lane) if ln == lane]
    tests = [*sorted(pol.team), *named, *flaky]
    return {
        t: f"quarantined, {s.why}"
        for t, s in standings(repo, pol, lane, tests).items()
        if s.quarantined
    }


def tests_known_flaky(repo: Repository, lane: str) -> set[str]:
    """The tests of `lane` the history has seen pass and fail on one landed tree."""
    return {test for (_ln, test) in testdb.flaky_since(repo.state, lane)}


def tests_seen_flipping(repo: Repository, lane: str, besides: str | None = None) -> set[str]:
    """The tests of `lane` seen to pass and fail on one tree (`besides` that tree), a
    candidate's too: never a quarantine (that needs landed trees), but a reason to ask
    more evidence of a failure before it blames anyone."""
    seen = testdb.flaky_since(repo.state, lane, on="candidate", besides=besides)
    landed = testdb.flaky_since(repo.state, lane, besides=besides)
    return {test for (_ln, test) in [*seen, *landed]}
