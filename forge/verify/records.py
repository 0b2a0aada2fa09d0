"""Verification records and the verdict cache, on disk under `<common>/forge/verify/`.

    records/<id>.json              every verification, whole
    cache/<tree>-<config>.json     the record that judged this tree PASS or FLAKY
    cache/<tree>-<config>.fail.json  the record that judged it FAIL, confirmed, and
                                   its failing tests
    latest/<key>.json              the last verification of a key (a plan, `cli`, ...)

Every file is sealed (forge/base/seal.py): a record or pointer without forge's seal
is not believed, so a verdict is remembered only when forge recorded it.

Kept free of heavy imports: the pre-push hook answers from here in a few ms.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from forge.base import seal
from forge.base.files import SCHEMA_VERSION, JsonObject, StateDir, read_json_or, write_json
from forge.errors import StateError
from forge.frozen import frozen
from forge.verify.failures import Failure
from forge.verify.lane_results import LaneResult, LaneRun, Verdict, worst

__all__ = ["LaneResult", "LaneRun", "Lookup", "Verdict", "VerifyRecord", "worst"]


@frozen
class VerifyRecord:
    id: str
    key: str
    commit: str
    tree: str
    config_hash: str
    verdict: Verdict
    lanes: tuple[LaneResult, ...]
    started: str
    duration: float
    cached: bool = False

    def logs(self) -> list[str]:
        return [run.log for lane in self.lanes for run in lane.runs]

    @property
    def deselected(self) -> tuple[tuple[str, str, str], ...]:
        """(lane, test, why) of each forgiven test the verdict's runs left out."""
        return tuple((lane.name, t, why) for lane in self.lanes for t, why in lane.deselected)

    @property
    def summary(self) -> str:
        """`PASS (quarantined: T failed)`, `FLAKY (flaky: T)`, `EMPTY (lane unit: ran
        no tests)`, or the verdict alone: the verdict with the tests that shaped it."""
        said = [
            f"lane {lane.name}: {lane.reason}" if lane.verdict == Verdict.EMPTY else lane.named
            for lane in self.lanes
            if lane.named or lane.verdict == Verdict.EMPTY
        ]
        return f"{self.verdict} ({'; '.join(said)})" if said else str(self.verdict)

    @property
    def failures(self) -> tuple[Failure, ...]:
        """The failing tests of every failing lane, lane by lane."""
        return tuple(f for lane in self.lanes for f in lane.failures)

    @property
    def confirmed(self) -> bool:
        """A FAIL that is no flake: every failing lane failed again when it was run
        again, or changed its checkout (never a flake). A setup that failed, or a
        lane that failed once and was not run again, might pass next time."""
        bad = [lane for lane in self.lanes if lane.verdict == Verdict.FAIL]
        return (
            self.verdict == Verdict.FAIL
            and bool(bad)
            and all(
                lane.runs
                and lane.runs[-1].kind != "setup"
                and (len(lane.runs) >= 2 or bool(lane.runs[-1].changed))
                for lane in bad
            )
        )

    def to_dict(self) -> JsonObject:
        return {
            "schema_version": SCHEMA_VERSION,
            "id": self.id,
            "key": self.key,
            "commit": self.commit,
            "tree": self.tree,
            "config_hash": self.config_hash,
            "verdict": self.verdict.value,
            "lanes": {
                lane.name: {
                    "command": lane.command,
                    "verdict": lane.verdict.value,
                    "runs": [r.to_dict() for r in lane.runs],
                    **({"forgiven": [list(f) for f in lane.forgiven]} if lane.forgiven else {}),
                }
                for lane in self.lanes
            },
            "started": self.started,
            "duration": round(self.duration, 3),
            "cached": self.cached,
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> VerifyRecord:
        """Read as `to_dict` wrote it; fields an older forge did not write get defaults."""
        lanes = tuple(
            LaneResult(
                name=name,
                command=str(lane.get("command", "")),
                verdict=Verdict(lane["verdict"]),
                runs=tuple(LaneRun.from_dict(r) for r in lane.get("runs", [])),
                forgiven=tuple((str(t), str(w)) for t, w in lane.get("forgiven") or ()),
            )
            for name, lane in dict(data.get("lanes") or {}).items()
        )
        return cls(
            id=str(data.get("id", "")),
            key=str(data.get("key", "")),
            commit=str(data.get("commit", "")),
            tree=str(data.get("tree", "")),
            config_hash=str(data.get("config_hash", "")),
            verdict=Verdict(data["verdict"]),
            lanes=lanes,
            started=str(data.get("started", "")),
            duration=float(data.get("duration", 0.0)),
            cached=bool(data.get("cached", False)),
        )


def named_tests(record: VerifyRecord) -> dict[str, object]:
    """For a verification that passed despite failing tests: its summary and those
    tests (`quarantined`, `flaky`); {} when it names none."""
    quarantined = [t for lane in record.lanes for t in lane.quarantined]
    flaky = [t for lane in record.lanes for t in lane.flaky_tests]
    deselected = [{"lane": lane, "test": t, "why": why} for lane, t, why in record.deselected]
    if not quarantined and not flaky and not deselected:
        return {}
    out: dict[str, object] = {"summary": record.summary, "quarantined": quarantined}
    out["flaky"] = flaky
    if deselected:
        out["deselected"] = deselected
    return out


def _dir(state: StateDir) -> Path:
    return state.verify_dir


def logs_dir(state: StateDir, record_id: str) -> Path:
    return _dir(state) / "logs" / record_id


def _record_file(state: StateDir, record_id: str) -> Path:
    return _dir(state) / "records" / f"{record_id}.json"


def _cache_file(state: StateDir, tree: str, config_hash: str) -> Path:
    return _dir(state) / "cache" / f"{tree}-{config_hash}.json"


def _fail_file(state: StateDir, tree: str, config_hash: str) -> Path:
    return _dir(state) / "cache" / f"{tree}-{config_hash}.fail.json"


def _latest_file(state: StateDir, key: str) -> Path:
    return _dir(state) / "latest" / f"{key}.json"


def save(state: StateDir, record: VerifyRecord, *, remember: bool = True) -> None:
    """Store the record, point its key at it, and remember or forget its verdict
    (with `remember` False: store the record only)."""
    if not record.cached:
        write_json(_record_file(state, record.id), seal.sealed(record.to_dict()))
    if not remember:
        return
    write_json(
        _latest_file(state, record.key),
        seal.sealed({"record": record.id, "commit": record.commit, "cached": record.cached}),
    )
    if record.cached or not record.config_hash:
        return
    cache = _cache_file(state, record.tree, record.config_hash)
    failed = _fail_file(state, record.tree, record.config_hash)
    if record.verdict in (Verdict.PASS, Verdict.FLAKY):
        write_json(cache, seal.sealed({"record": record.id}))
        failed.unlink(missing_ok=True)  # a forced run passed: the FAIL is no longer the truth
    elif record.verdict == Verdict.FAIL:
        # A forced run that failed: the tree's remembered PASS is no longer the truth.
        with contextlib.suppress(FileNotFoundError):
            cache.unlink()
        if record.confirmed:
            tests = [f.to_dict() for f in record.failures]
            write_json(failed, seal.sealed({"record": record.id, "failures": tests}))


def load(state: StateDir, record_id: str) -> VerifyRecord | None:
    """The record forge wrote under this id (None: there is none, or it is not sealed)."""
    path = _record_file(state, record_id)
    data = read_json_or(path, None, what="verification record")
    if data is None:
        return None
    record = _parse(path, data)
    return record if seal.valid(data) else None


def _parse(path: Path, data: object) -> VerifyRecord:
    try:
        if not isinstance(data, dict):
            raise TypeError(f"{type(data).__name__}, not an object")
        return VerifyRecord.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        why = f"`{exc.args[0]}` is missing" if isinstance(exc, KeyError) else str(exc)
        raise StateError(
            f"verification record {path} has an unexpected shape ({why}); move it aside "
            f"(forge verifies the commit again)"
        ) from None


@frozen
class Lookup:
    record: VerifyRecord | None  # the remembered verdict, marked cached
    ignored: str | None = None  # why an entry that is there was not believed


def lookup(state: StateDir, tree: str, config_hash: str, *, failed: bool = False) -> Lookup:
    """The remembered PASS or FLAKY verdict of this (tree, config), if forge wrote it;
    `failed`: its remembered confirmed FAIL instead."""
    where = (_fail_file if failed else _cache_file)(state, tree, config_hash)
    entry = read_json_or(where, None, what="verdict cache entry")
    if entry is None:
        return Lookup(None)
    if not seal.valid(entry):
        return Lookup(None, "its cache entry does not carry forge's seal")
    rid = str(entry.get("record", ""))
    path = _record_file(state, rid)
    data = read_json_or(path, None, what="verification record")
    if data is None:
        return Lookup(None)
    record = _parse(path, data)
    if not seal.valid(data):
        return Lookup(None, f"its record {rid} does not carry forge's seal")
    if record.tree != tree or record.config_hash != config_hash:
        return Lookup(None, f"its record {rid} is of another tree or configuration")
    wanted = (Verdict.FAIL,) if failed else (Verdict.PASS, Verdict.FLAKY)
    if record.verdict not in wanted:
        return Lookup(None)
    return Lookup(replace(record, cached=True))


def cached(
    state: StateDir, tree: str, config_hash: str, *, failed: bool = False
) -> VerifyRecord | None:
    """The remembered PASS or FLAKY verdict of this (tree, config), marked cached
    (`failed`: or its remembered confirmed FAIL)."""
    found = lookup(state, tree, config_hash).record
    if found is None and failed:
        found = lookup(state, tree, config_hash, failed=True).record
    return found


def latest(state: StateDir, key: str) -> VerifyRecord | None:
    entry = read_json_or(_latest_file(state, key), None, what="latest verification")
    if not seal.valid(entry):
        return None
    record = load(state, str(entry.get("record", "")))
    if record is None:
        return None
    return replace(
        record,
        key=key,
        commit=str(entry.get("commit", record.commit)),
        cached=bool(entry.get("cached", False)),
    )
