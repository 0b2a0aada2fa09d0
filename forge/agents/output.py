"""Reading an agent's log: infrastructure failures and their retry-after hints.

Only text that can be the CLI's own error is searched: plain lines near the
end of the log, and the error fields of JSON events (a Claude `result` with
`is_error`, Codex `error` / `turn.failed`, Gemini `error`). The agent's own
messages and tool output in JSON events are skipped, so an agent that writes a
rate limiter, or runs a test printing "Connection refused", is not mistaken for
an outage.

Context-window overflow is not an infrastructure failure: the same prompt would
overflow again, so a retry cannot fix it. It is a failed attempt, and a sign
the task should be split (`is_context_overflow` lets the runner say so).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, tzinfo
from functools import lru_cache
from typing import TYPE_CHECKING

from forge.agents.definition import INFRA_KINDS
from forge.agents.message import human, is_noise
from forge.base import durations
from forge.base.shape import as_object, number
from forge.frozen import frozen

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef

_SCAN_BYTES = 4_000_000  # logs can be huge; the facts sit at the end
_PLAIN_LINES = 60  # CLIs print their fatal error last

# Apply to every agent but a script (shell), and only after a non-zero exit.
# Checked after the agent's own.
GENERIC_PATTERNS: dict[str, tuple[str, ...]] = {
    "auth": (
        r"\binvalid[ _-]?api[ _-]?key\b",
        r"\b401\b.*\bunauthori[sz]ed\b",
        r"\bauthentication (?:failed|error)\b",
        r"\bnot logged in\b",
    ),
    "quota": (
        r"\bquota (?:exceeded|exhausted)\b",
        r"\binsufficient[_ ]quota\b",
        r"\bhit your (?:\w+ )?limit\b",
        r"\bcredit balance is too low\b",
    ),
    "rate-limit": (
        r"\brate[ _-]?limit",
        r"\btoo many requests\b",
        # "429" alone also appears in tracebacks ("line 429"); want it as a status.
        r"(?:status|code|error|http)\W{0,3}\w{0,12}\W{0,3}429\b",
    ),
    "network": (
        r"\bE(?:CONNRESET|CONNREFUSED|TIMEDOUT|NOTFOUND|AI_AGAIN|HOSTUNREACH|NETUNREACH)\b",
        r"\bconnection (?:refused|reset|failed|error)\b",
        r"\bcould not resolve host\b",
        r"\btemporary failure in name resolution\b",
        r"\bnetwork is unreachable\b",
    ),
    # A provider's 5xx after the CLI's own retries: the infrastructure failed, not
    # the model's work.
    "server": (
        r"(?:status|code|error|http)\W{0,3}\w{0,12}\W{0,3}5(?:00|02|03|04)\b",
        r"\binternal server error\b",
        r"\bservice unavailable\b",
        r"\bbad gateway\b",
        r"\bgateway time-?out\b",
    ),
}

_CONTEXT_OVERFLOW = re.compile(
    r"prompt is too long|ran out of room in the model's context window|has hit a token limit"
    r"|context[ _-]?(?:window|length)[ _-]?exceeded|exceeds? the (?:model's )?context (?:window|length)",
    re.IGNORECASE,
)
# What procgroup.run_group logs when the program cannot be started (it then returns 127).
_SPAWN_FAILED = re.compile(r"^forge: cannot run `.*$", re.MULTILINE)
# bubblewrap could not start the command inside the sandbox (exit 1): a binary the
# host has where the sandbox does not show it (under the /tmp it replaces).
_SANDBOX_EXEC = re.compile(r"^bwrap: execvp .*$", re.MULTILINE)
_MISSING_BINARY = re.compile(
    r"command not found|no such file or directory|not found|permission denied", re.IGNORECASE
)


@frozen
class InfraFailure:
    kind: str  # one of INFRA_KINDS
    message: str  # one line: what the CLI said
    retry_after: float | None  # seconds, when the CLI said when to come back


@lru_cache(maxsize=512)
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# One JSON object a CLI printed, as it came: each reader narrows the fields it reads.
Event = Mapping[str, object]


@frozen
class AgentLog:
    """An agent's log read once: the JSON values its CLI printed (one per line, or
    pretty-printed over several), the objects among them (its events), and the
    remaining plain lines."""

    values: tuple[object, ...]
    events: tuple[Event, ...]
    plain: tuple[str, ...]


@lru_cache(maxsize=4)
def read_log(output: str) -> AgentLog:
    """The log `output` read: each of its readers (failure, usage, models) is
    handed the same log, parsed once."""
    values, plain = _split(output)
    events = tuple(e for e in map(as_object, values) if e is not None)
    return AgentLog(tuple(values), events, tuple(plain))


def _split(output: str) -> tuple[list[object], list[str]]:
    text = output[-_SCAN_BYTES:]
    decoder = json.JSONDecoder()
    values: list[object] = []
    plain: list[str] = []
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        start = pos + len(line) - len(line.lstrip())
        if text.startswith(("{", "["), start):
            try:
                value, stop = decoder.raw_decode(text, start)
            except ValueError:
                pass
            else:
                values.append(value)
                after = text.find("\n", stop)
                pos = len(text) if after < 0 else after + 1
                continue
        if line.strip():
            plain.append(line.strip())
        pos = end + 1
    return values, plain


def _error_texts(obj: Event) -> list[str]:
    """The error messages a CLI's JSON event carries; none for ordinary events."""
    out: list[str] = []
    kind = obj.get("type")
    if kind == "system":  # Claude's init and api_retry (read by _retry_text, when cut off)
        return out
    if kind == "result" and obj.get("is_error"):  # Claude: branch on is_error, not subtype
        out.append(str(obj.get("result") or obj.get("subtype") or "error"))
        errors = obj.get("errors")
        if isinstance(errors, list):
            out.extend(str(e) for e in errors if e)
    if kind in ("error", "turn.failed") and obj.get("message"):  # Codex
        out.append(str(obj["message"]))
    err = obj.get("error")
    if isinstance(err, dict) and (kind in ("error", "turn.failed", "result") or kind is None):
        out.append(_http_prefix(err) + str(err.get("message") or err.get("type") or err))
    elif isinstance(err, str) and err:
        out.append(err)
    return out


def _http_prefix(err: Mapping[str, object]) -> str:
    """`status 429: ` for an HTTP status; nothing for a CLI's own code (Gemini's 41)."""
    code = err.get("code") or err.get("status")
    if code is None or (isinstance(code, int) and not 400 <= code <= 599):
        return ""
    return f"status {code}: "


def _one_line(text: str) -> str:
    return human(text)[:300]


def cli_message(output: str) -> str | None:
    """The CLI's own last word on a failed run, from its JSON events: Claude's
    `result` (when `is_error`), Codex's `turn.failed` error, Gemini's `error`.
    Terminal events win over Codex's per-retry `error` lines. None for a log
    without such an event (plain-text CLIs, or a run that printed no JSON)."""
    for terminal in (True, False):
        for obj in reversed(read_log(output).events):
            if (obj.get("type") == "error") == terminal:
                continue
            texts = _error_texts(obj)
            if texts:
                return _one_line(texts[0]) or None
    return None


def failure_reason(output: str) -> str | None:
    """What a failed run said: the CLI's message, else its last plain line."""
    message = cli_message(output)
    if message:
        return message
    said = [line for line in read_log(output).plain if not is_noise(line)]
    return _one_line(said[-1]) if said else None


def said_error(defn: AgentDef, output: str) -> str | None:
    """The last line the CLI printed as its own error (`error_patterns`), made
    readable; None when it printed none."""
    if not defn.error_patterns:
        return None
    plain = read_log(output).plain
    rxs = [re.compile(p, re.IGNORECASE | re.MULTILINE) for p in defn.error_patterns]
    for line in reversed(plain[-_PLAIN_LINES:]):
        if any(rx.search(line) for rx in rxs):
            return _one_line(_unwrapped(output, line))
    return None


_WRAPPED = 60  # a line this long that a CLI's console broke (aider: at 80 columns)


def _unwrapped(output: str, line: str) -> str:
    """`line` with the lines a console wrapped it onto (up to a blank line, a line
    that starts another message, or one that is not full)."""
    raw = [ln.strip() for ln in output[-_SCAN_BYTES:].splitlines()]
    at = len(raw) - 1 - raw[::-1].index(line) if line in raw else None
    if at is None:
        return line
    joined, last = [line], line
    for nxt in raw[at + 1 : at + 6]:
        if len(last) < _WRAPPED or not nxt or is_noise(nxt) or re.match(r"^\w[\w.]*:\s", nxt):
            break
        joined.append(nxt)
        last = nxt
    return " ".join(joined)


def _reset_epochs(value: object) -> Iterator[tuple[float, bool]]:
    """(resetsAt epoch, rejected?) from rate-limit events, however they nest."""
    obj = as_object(value)
    if obj is not None:
        for key in ("resetsAt", "resets_at"):
            epoch = number(obj.get(key))
            if epoch is not None:
                status = str(obj.get("status", "")).lower()
                yield float(epoch), status not in ("", "allowed", "allowed_warning")
        for inner in obj.values():
            yield from _reset_epochs(inner)


def _retry_text(obj: Event) -> str | None:
    """Claude's stream-json `system/api_retry` event as a line of text."""
    if obj.get("type") != "system" or obj.get("subtype") != "api_retry":
        return None
    delay = obj.get("retry_delay_ms")
    status = obj.get("error_status")
    head = f"API retry {obj.get('attempt')}/{obj.get('max_retries')}: "
    if not status:  # no response at all (offline, refused, DNS); its delay is its own
        return head + "connection failed"
    # After a response the delay follows the server's Retry-After, when it sent one.
    after = f"; retry in {round(delay)}ms" if isinstance(delay, int | float) else ""
    return f"{head}status {status} {obj.get('error')}{after}"


def _signals(output: str) -> tuple[list[str], list[tuple[float, bool]]]:
    log = read_log(output)
    texts: list[str] = []
    resets: list[tuple[float, bool]] = []
    # The CLI's own retries say what went wrong only when nothing came after them
    # (the run was cut off while it waited): a final result says more.
    finished = any(d.get("type") == "result" for d in log.events)
    for obj in log.events:
        texts.extend(_error_texts(obj))
        resets.extend(_reset_epochs(obj))
        retry = None if finished else _retry_text(obj)
        if retry is not None:
            texts.append(retry)
    texts.extend(line for line in log.plain[-_PLAIN_LINES:] if not is_noise(line))
    return texts, resets


def classify_failure(
    defn: AgentDef,
    *,
    returncode: int | None,
    output: str,
    spawn_error: str | None = None,
    now: float | None = None,
    said_at: float | None = None,
) -> InfraFailure | None:
    """An infrastructure failure, or None for an ordinary result (pass or fail).

    Call it after every agent run. A zero exit is looked at only for agents
    whose CLI exits 0 on API errors (`infra_on_success`: aider). A script's
    (the shell preset's) output is the user's own and is never read for
    outages; only a failed spawn counts there. `said_at` is when the CLI last
    wrote (the drain's clock, not the log's mtime, which forge's own lines at a
    timeout move): a printed "retry in 60s" counts from then, not from when forge
    reads it (after a timeout, perhaps minutes later).
    """
    if spawn_error is not None:
        return InfraFailure(
            "binary-missing", f"agent {defn.name} could not start: {spawn_error}", None
        )
    spawn = _SPAWN_FAILED.search(output[-_SCAN_BYTES:]) if returncode == 127 else None
    if spawn is None and returncode == 1:
        spawn = _SANDBOX_EXEC.search(output[-_SCAN_BYTES:])
    if spawn is not None:
        return InfraFailure("binary-missing", spawn.group(0).strip(), None)
    if defn.script or (returncode == 0 and not defn.infra_on_success):
        return None
    texts, resets = _signals(output)
    when = datetime.now().timestamp() if now is None else now
    kind, message = _match(defn, returncode, texts, cli_message(output))
    if kind is None and any(rejected for _, rejected in resets):
        kind, message = "rate-limit", "rate limit reached (rate_limit_event)"
    if kind is None or message is None:
        return None
    retry = None
    if kind in ("quota", "rate-limit", "network", "server"):
        retry = _retry_after(texts, resets, when, since=when if said_at is None else said_at)
    return InfraFailure(kind, _one_line(message), retry)


def _match(
    defn: AgentDef, returncode: int | None, texts: list[str], said: str | None
) -> tuple[str | None, str | None]:
    # A CLI's JSON error says more than its last plain line (Gemini's is a banner).
    last = said or (texts[-1] if texts else f"exit {returncode}")
    if returncode in (126, 127):
        for text in reversed(texts):
            if _MISSING_BINARY.search(text):
                return "binary-missing", text
    for kind, codes in defn.infra_exit_codes:
        if returncode in codes:
            return kind, last
    # After exit 0 the run may well have succeeded, and its log is the agent's
    # talk and tool output, full of words like "rate limit": only the CLI's own
    # exact messages can then tell of an outage, never the generic patterns.
    tables = [dict(defn.infra_patterns)]
    if returncode != 0:
        tables.append(GENERIC_PATTERNS)
    for table in tables:
        for kind in INFRA_KINDS:
            for pattern in table.get(kind, ()):
                rx = _rx(pattern)
                for text in reversed(texts):
                    if rx.search(text):
                        return kind, text
    return None, None


def is_context_overflow(output: str) -> bool:
    """Whether the agent ran out of context window (a failure; suggests a split)."""
    texts, _ = _signals(output)
    return any(_CONTEXT_OVERFLOW.search(t) for t in texts)


# --- retry-after -------------------------------------------------------------

_RETRY_IN = re.compile(
    rf"(?:retry[- _]?after|retry[- _]?delay|retry in|try again in|resets? in|retrying in)"
    rf"\W{{0,4}}\s*({durations.IN_TEXT})",
    re.IGNORECASE,
)
_RESETS_IN_SECONDS = re.compile(r"resets_in_seconds\W{0,3}\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# Claude: "resets 4:20am (Europe/Warsaw)", "resets Mon 12:00am", "resets 5pm (...)".
_CLAUDE_RESET = re.compile(
    r"resets\s+(?:(mon|tue|wed|thu|fri|sat|sun)[a-z]*\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)\b"
    r"(?:\s*\(([^)]+)\))?",
    re.IGNORECASE,
)
# Codex: "try again at 3:45 PM." / "try again at 4:42:19 AM." / "try again at Jul
# 9th, 2026 1:47 AM." (local time; a time without a date is on the day it was said).
_CODEX_RESET = re.compile(
    r"try again at\s+(?:([a-z]{3})[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4}),?\s+)?"
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)",
    re.IGNORECASE,
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def parse_retry_duration(text: str) -> float | None:
    """Seconds in `30s`, `1m30s`, `560ms`, `2 minutes`, `20` (seconds)."""
    return durations.seconds_in(text)


def _retry_after(
    texts: list[str], resets: list[tuple[float, bool]], now: float, *, since: float
) -> float | None:
    # Only a rejecting event's reset time counts: "allowed" events carry one too.
    rejected = [epoch for epoch, is_rejected in resets if is_rejected]
    if rejected:
        return max(0.0, max(rejected) - now)
    # A duration counts from when it was printed; what has passed since is served.
    passed = max(0.0, now - since)
    for text in reversed(texts):
        if m := _RESETS_IN_SECONDS.search(text):
            return max(0.0, float(m.group(1)) - passed)
        if m := _RETRY_IN.search(text):
            seconds = parse_retry_duration(m.group(1))
            return None if seconds is None else max(0.0, seconds - passed)
        if m := _CLAUDE_RESET.search(text):
            return _until_claude_reset(m, now)
        if m := _CODEX_RESET.search(text):
            return _until_codex_reset(m, now, said=since)
    return None


def _local_tz(now: float) -> tzinfo:
    tz = datetime.fromtimestamp(now).astimezone().tzinfo
    assert tz is not None
    return tz


def _hour(hour: int, ampm: str) -> int:
    return hour % 12 + (12 if ampm.lower() == "pm" else 0)


def _until_claude_reset(m: re.Match[str], now: float) -> float | None:
    weekday, hour, minute, ampm, zone = m.groups()
    tz: tzinfo = _local_tz(now)
    if zone:
        # zoneinfo loads the interpreter's build config (sysconfig): only when needed.
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        with contextlib.suppress(ZoneInfoNotFoundError, ValueError):
            tz = ZoneInfo(zone.strip())
    current = datetime.fromtimestamp(now, tz)
    target = current.replace(
        hour=_hour(int(hour), ampm), minute=int(minute or 0), second=0, microsecond=0
    )
    if weekday:
        days = (_WEEKDAYS.index(weekday[:3].lower()) - target.weekday()) % 7
        target += timedelta(days=days)
    while target <= current:
        target += timedelta(days=7 if weekday else 1)
    return target.timestamp() - now


def _until_codex_reset(m: re.Match[str], now: float, *, said: float) -> float | None:
    """Seconds until the time Codex named. Without seconds the reset may fall
    anywhere in the named minute, so the minute's end is awaited; without a date
    it is on the day it was said (Codex names the date otherwise), so a time read
    just after it passed is now, not tomorrow."""
    month, day, year, hour, minute, second, ampm = m.groups()
    tz = _local_tz(now)
    h, mi, sec = _hour(int(hour), ampm), int(minute), int(second or 0)
    rest = timedelta(minutes=1) if second is None else timedelta()
    if month:
        if month[:3].lower() not in _MONTHS:
            return None
        try:
            target = datetime(
                int(year), _MONTHS.index(month[:3].lower()) + 1, int(day), h, mi, sec, tzinfo=tz
            )
        except ValueError:
            return None
        return max(0.0, (target + rest).timestamp() - now)
    when_said = datetime.fromtimestamp(said, tz)
    target = when_said.replace(hour=h, minute=mi, second=sec, microsecond=0) + rest
    # A reset before the moment it was announced is the next day's (past midnight).
    if target < when_said - timedelta(hours=1):
        target += timedelta(days=1)
    return max(0.0, target.timestamp() - now)
