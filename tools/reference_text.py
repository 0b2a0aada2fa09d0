"""One line for every key, variable and exit code forge accepts: the words of
docs/reference/, which `tools/reference.py` writes from the checkers' own tables. A
key a checker accepts without a line here fails `tools/reference.py --check`."""

from __future__ import annotations

_SHARED_TASK = {
    "agent": "agent spec `name[:model[:effort]]` for prompt tasks (`auto`: chosen from history)",
    "timeout": 'time limit of one attempt, check included (`"30m"`; default 30m)',
    "review": "a reviewer agent spec that judges each task after its check",
    "candidates": "best-of-N: these agent specs run at once on each prompt task",
    "best_of": "best-of-N: N attempts of the task's own spec at once (1-16)",
    "select": "`first` (default): the first candidate that passes lands; `best`: judge all",
    "judge": 'the agent spec that names the best candidate under `select = "best"`',
}

KEYS: dict[str, dict[str, str]] = {
    "plan": {
        "name": "the plan's name (default: the file's stem); names its branches",
        "base": "the commit the plan starts from (default: HEAD when `forge plan` runs)",
        "max_parallel": "tasks (attempts) running at once (default 2)",
        "setup": "a command run once in every worktree and verification checkout",
        "setup_timeout": "time limit of one run of `setup` (default 10m)",
        "env": "environment of every command; `{worktree}` and `$VAR` are expanded",
        "verify": 'the verification: a command, or `[verify.lanes]` (see "[verify]")',
        "verify_reruns": "reruns of a failing lane: a later pass is FLAKY (default 2)",
        "gate": "how work lands with a verification: `queue` (default), `end`, `off`",
        "batch_max": "tasks verified together at most (default 8)",
        "batch_window": "`adaptive` (default) or `fixed`: how many queued tasks a batch takes",
        "verify_parallel": "candidate chains verified at once (default 1)",
        "gate_on": '`"regressions"` (default): a test already failing on the head blames '
        'nobody; `"green"`: every test must pass',
        "fallback": "agents to use while the default agent's provider is paused",
        "log_cap": 'output kept in each command\'s log (default "50M")',
        "budget": 'pause (exit 8) when the plan\'s spend reaches it ("20 USD")',
        "escalate_after": "failures on one model and effort before moving up (default 3; 0: off)",
        "escalate_effort": "at the top model, raise the effort instead of stopping",
        "scope": "`error` (default): a change outside `files` fails the task; `warn`: said only",
        "clean": "`untracked` (default): a reused slot keeps ignored files; `all`: removes them",
        "sandbox": "run every command under bubblewrap, only its worktree writable "
        "(not said: on where the sandbox holds; `false` turns it off); or a `[sandbox]` "
        "table of `enabled`, `sockets` and `host_ports`",
        "strict_model": "an attempt that ran another model than asked is INFRA",
        "auto": 'the pool `agent = "auto"` chooses from',
        "notify": "a command told of a run's pause, need of a person, and end (JSON on stdin)",
        "quarantine": '`"auto"` (default): a flaky test\'s failure blames nobody; `"off"`',
        "release_after": "passes in a row on landed trees that release a quarantined test (20)",
        "sockets": "sockets the sandbox lets a task reach: variable names or absolute paths",
        "host_ports": "TCP ports on the host's loopback a sandboxed command with the network "
        "reaches (it has a network of its own: docs/security.md), at 127.0.0.1:PORT as on the "
        "host, e.g. [11434]",
        **_SHARED_TASK,
    },
    "[[task]]": {
        "id": "the task's id (letters, digits, `.`, `_`, `-`); names its branch",
        "title": "a title for people (and the commit's subject)",
        "prompt": "what the agent is asked to do",
        "run": "a shell command instead of an agent",
        "files": "the paths it may change (globs and folders allowed); overlapping tasks wait",
        "deps": "ids of the tasks that must merge first",
        "check": "the task's own check, run in its worktree",
        "estimate": "relative size (default 1), for critical-path order and the ETA",
        "network": "the task's check keeps the network in the sandbox",
        **_SHARED_TASK,
    },
    "forge.toml": {
        "agents": "`[agents.NAME]`: your own agents, or keys that override a preset's",
        "verify": "`[verify]`: the verification `forge verify` and the hooks run",
        "cluster": "`[cluster]`: the Dask scheduler attempts run on",
        "prices": "`[prices]`: USD per million input and output tokens, by model name",
        "auto": 'the pool `agent = "auto"` chooses from, for every plan',
        "draft": '`[draft] agent = "SPEC"`: the planner `forge draft` asks',
        "notify": "the command told of every plan's runs (a plan's own `notify` wins)",
        "tests": "`[tests]`: a team's word on tests (quarantine)",
        "verify_pool_max": "verification checkouts kept per setup and env, shared by every "
        "plan and the hooks (default 3; the least recently used idle one goes)",
        "host": "`[host]`: the code host `forge pr` hands verified work to",
    },
    "[verify]": {
        "command": "one verification command (or `lanes`)",
        "lanes": "named commands run in parallel, each its own verdict",
        "reruns": "reruns of a failing lane (default 2)",
        "timeout": "time limit of a lane (default 1h)",
        "grace": "seconds between TERM and KILL when a lane is stopped (default 5)",
        "setup": "a command run once in the verification checkout",
        "setup_timeout": "time limit of `setup` (default 10m)",
        "env": "environment of the lanes; `{worktree}` is the checkout",
        "gate_on": '`"regressions"` (default) or `"green"`, as the plan key',
    },
    "[verify.lanes.NAME]": {
        "command": "the lane's command",
        "junit": "the JUnit XML report the command writes (forge asks pytest for one itself)",
        "subset": "how to run some tests only: a command with `{tests}`",
        "allow_empty": "a test runner that ran no test may pass",
        "network": "the lane keeps the network in the sandbox",
    },
    "[tests]": {
        "quarantine": 'tests quarantined by the team\'s word, or `"auto"` / `"off"`',
        "release_after": "passes in a row on landed trees that release a quarantined test",
    },
    "[cluster]": {
        "address": "the scheduler (`tls://host:8786`, or `local:N`: TLS with a certificate of the run's)",
        "remote": "a git remote the workers can reach (not needed on this machine)",
        "tls_ca": "the CA file of a TLS scheduler (with `tls_cert` and `tls_key`)",
        "tls_cert": "the client certificate for a TLS scheduler",
        "tls_key": "the client key for a TLS scheduler",
        "insecure": "accept a scheduler reached without TLS (`tcp://`)",
    },
    "[host]": {
        "api": 'the REST API of a GitHub Enterprise host (`"https://HOST/api/v3"`); default: '
        "github.com's, from the remote's URL",
        "repo": "`OWNER/NAME`, when the remote's URL does not say it (a path)",
        "timeout": "time limit of one call to the host (default 30s; then exit 8)",
        "wait": "how long a rate limit with a reset time is waited out (default 5m; then exit 8)",
        "poll": "how often `forge pr --watch` asks the host again (default 15s)",
        "checks_within": "how long `--watch` waits for a first check before saying none came "
        "(default 10m)",
    },
    "[agents.NAME]": {
        "command": "argv with placeholders `{prompt_file}`, `{model}`, `{effort}`, `{task}`, "
        "`{worktree}`, `{review_file}`",
        "sandbox_command": "run instead of `command` in forge's sandbox, where the CLI's own "
        "sandbox needs telling (the `claude` preset's: its weaker nested mode)",
        "root_sandbox_command": "run instead of `command` as root in forge's sandbox, where the "
        "CLI's own sandbox cannot start (the `codex` and `claude` presets': theirs off)",
        "models": "the model ladder, weakest first",
        "efforts": "the efforts it accepts, weakest first",
        "default_model": "the model used when a spec names none",
        "default_effort": "the effort used when a spec names none",
        "prompt_on_stdin": "feed the prompt file on standard input",
        "script": "the prompt is a script that runs (the `shell` preset)",
        "env": "environment set for the agent",
        "root_env": "environment set only when forge runs as root",
        "isolate_env": "per-task state folders, set when `isolate_when` holds",
        "isolate_when": "`VAR` or `VAR=value`: when `isolate_env` applies",
        "timeout": "time limit of one attempt on this agent",
        "infra_patterns": "by kind, text in the output that means the provider failed (INFRA)",
        "infra_exit_codes": "exit codes that mean the provider failed (INFRA)",
        "infra_on_success": "look for provider failures even after exit 0",
        "error_patterns": "text in the output that is the reason when the run changed nothing",
        "stop_on_infra": "stop the CLI as soon as it prints one of its `infra_patterns`",
        "usage_format": "which reader takes cost and tokens from its output",
        "ignore_paths": "files the CLI leaves in the worktree that are never the task's change",
        "written_for": "the CLI version the definition was written for (shown, not checked)",
        "max_parallel": "tasks on this agent at once",
    },
}

ENVIRONMENT: dict[str, str] = {
    "FORGE_WORKTREES": "where slots and verification checkouts live "
    "(default `../.forge-worktrees/<repo>`; `--worktree-root` wins; under a given root, "
    "`<root>/<repo>`, or `<root>/<repo>-<hash>` when another repository of that name has it)",
    "FORGE_GRACE": "seconds between TERM and KILL when a command is stopped (default 5)",
    "FORGE_SANDBOX": "`on` or `off`: the sandbox mode when neither the command nor the plan "
    "says (default: on where `forge doctor` finds that it holds)",
    "FORGE_LAYERS": "`on` or `off`: verification checkouts as layers (a fresh upper layer "
    "each run over read-only base and setup layers) or as checkouts cleaned between runs "
    "(default `off`: layers are opt-in in this release; with `on`, layers where an overlay "
    "can be mounted in a mount namespace, else checkouts, said once a run; `forge doctor` "
    "says which)",
    "FORGE_BOX": "`off`: commands run without the sandbox get no box (pid and mount "
    "namespaces hiding forge's key and history), as where none can be made; for tests "
    "whose commands write down `$$`",
    "FORGE_INFRA_BACKOFF": "seconds to wait after an INFRA failure, doubled up to 5 minutes "
    "(default 5)",
    "FORGE_LOG_CAP": "output kept in each command's log when the plan sets no `log_cap`",
    "FORGE_SKIP_VERIFY": "`1`: the pre-push hook pushes without verification",
    "FORGE_WORKER_CACHE": "a cluster worker's mirror and slots (default `~/.cache/forge/worker`)",
    "FORGE_FAULT": "tests only: make forge kill itself at a named point",
    "FORGE_TASK": "set by forge for a task's commands (and `forge shell`): the task's id",
    "FORGE_PLAN": "set by `forge shell`: the plan of the task whose worktree it opened",
    "FORGE_SLOT": "set by `forge shell`: the worktree it opened",
    "FORGE_WORKTREE": "set by forge for an agent: its worktree",
    "FORGE_PROC_TAG": "set by forge for every command: finds its processes after a crash",
    "FORGE_LANE_DESELECT": "set by forge for a pytest lane: the forgiven tests' exact ids its plugin leaves out, one a line",
    "FORGE_LANE_REPORT_FD": "set by forge for a pytest lane: the file descriptor its plugin writes the test report to",
    "FORGE_WORKER_PID": "set by forge on a cluster worker: the worker's process",
    "FORGE_FEEDBACK_FILE": "set by forge on a retry: the last failure, for the agent to read",
    "FORGE_REVIEW_FILE": "set by forge for a reviewer: where to write its verdict",
    "FORGE_JUDGE_FILE": "set by forge for a judge: where to name the winner",
    "FORGE_EVENT": "set by forge for a `notify` command: the event, as on its stdin",
    "FORGE_PLAN_FILE": "set by forge for a planner (`forge draft`): where to write the plan",
}

EXIT_CODES: dict[int, str] = {
    0: "everything asked for succeeded (a FLAKY verification is reported, and still 0)",
    2: "usage or bad input, or refused (another forge process holds the plan): nothing changed",
    3: "escalation exhausted: the task should be split (a suggestion is written)",
    5: "a task or the verification failed",
    8: "paused: a hold, the agents' infrastructure stopped the run, or the budget is spent",
    130: "interrupted by the user",
}
