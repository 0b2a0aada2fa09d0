"""`forge plan --graph`: the DAG as Mermaid (default) or DOT, through the real CLI."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.gitkit import run_forge

PLAN = """\
name = "g"
[[task]]
id = "end"
prompt = "a Mermaid keyword as an id"
files = ["a.txt"]
[[task]]
id = "api-v2.1"
prompt = "x"
files = ["a.txt"]
[[task]]
id = "route"
run = "echo r > r.txt"
files = ["r.txt"]
deps = ["end", "api-v2.1"]
"""


def _plan(tmp_path: Path) -> Path:
    path = tmp_path / "g.toml"
    path.write_text(PLAN)
    return path


def test_mermaid_groups_waves_and_draws_every_dependency(repo: Path, tmp_path: Path) -> None:
    cp = run_forge(repo, "plan", "--check", "--graph", str(_plan(tmp_path)))
    assert cp.returncode == 0, cp.stderr
    out = cp.stdout
    assert out.startswith("flowchart LR\n")
    nodes = dict(re.findall(r'^\s+(t\d+)\["([^"]*)"\]$', out, re.MULTILINE))
    ids = {label: node for node, label in nodes.items()}
    assert set(ids) == {"end", "api-v2.1", "route"}
    edges = set(re.findall(r"^\s+(t\d+) --> (t\d+)$", out, re.MULTILINE))
    assert edges == {(ids["end"], ids["route"]), (ids["api-v2.1"], ids["route"])}
    # end and api-v2.1 overlap (a.txt): three waves
    assert out.count("subgraph w") == 3 and out.count("\n  end\n") == 3
    assert f"class {ids['route']} shell" in out
    assert not (repo / ".git" / "forge" / "plans" / "g").exists()  # --check records nothing


def test_dot_format(repo: Path, tmp_path: Path) -> None:
    cp = run_forge(repo, "plan", "--graph", "--format", "dot", str(_plan(tmp_path)))
    assert cp.returncode == 0, cp.stderr
    assert not (repo / ".git" / "forge" / "plans" / "g").exists()  # a view records nothing
    assert "recorded" not in cp.stdout + cp.stderr
    assert cp.stdout.startswith('digraph "g" {\n') and cp.stdout.endswith("}\n")
    assert '"end" -> "route";' in cp.stdout and '"api-v2.1" -> "route";' in cp.stdout
    assert cp.stdout.count("subgraph cluster_wave") == 3


def test_unknown_format_is_refused(repo: Path, tmp_path: Path) -> None:
    cp = run_forge(repo, "plan", "--graph", "--format", "svg", str(_plan(tmp_path)))
    assert cp.returncode == 2
    assert cp.stderr == "forge: --format: 'svg' is not one of mermaid, dot\n"
    assert not (repo / ".git" / "forge" / "plans" / "g").exists()


def test_a_deferral_by_overlap_is_drawn(repo: Path, tmp_path: Path) -> None:
    cp = run_forge(repo, "plan", "--check", "--graph", str(_plan(tmp_path)))
    assert cp.returncode == 0, cp.stderr
    nodes = dict(re.findall(r'^\s+(t\d+)\["([^"]*)"\]$', cp.stdout, re.MULTILINE))
    ids = {label: node for node, label in nodes.items()}
    overlaps = re.findall(r"^\s+(t\d+) -\. overlap \.-> (t\d+)$", cp.stdout, re.MULTILINE)
    assert overlaps == [(ids["end"], ids["api-v2.1"])]  # api-v2.1 waits for end (a.txt)
    cp = run_forge(repo, "plan", "--check", "--graph", "--format", "dot", str(_plan(tmp_path)))
    assert '"end" -> "api-v2.1" [style=dotted, label="overlap"];' in cp.stdout
