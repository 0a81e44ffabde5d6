"""The run store: one directory per evolution run, with a SQLite database in WAL mode.

Layout of a run directory::

    RUN_DIR/
      run.sqlite          candidates, turns, evaluations, config, events (WAL: safe against kill -9)
      config.json         the run's configuration, human-readable (never holds a secret)
      candidates/H.cake   the IR text of every candidate, named by its IR hash
      report/             what `cake report` writes

Durability contract (what `--resume` relies on):

* a turn's proposals, their static diagnostics and the ranking are written in ONE transaction, so a
  turn is either wholly proposed or not at all;
* each evaluation is written in its own transaction, with a UNIQUE constraint on the candidate, so a
  finished evaluation is never lost and can never be recorded twice;
* a turn is closed (`finished_at`) in its own transaction once every queued candidate is evaluated.

The store knows nothing about agents or the IR: it holds text, numbers and JSON.
"""

from __future__ import annotations

import enum
import hashlib
import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DB_NAME = "run.sqlite"
CONFIG_NAME = "config.json"
SCHEMA_VERSION = 1
RETIME_EVENT = "retime"  # events of this kind hold a `Retime` as JSON

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turns (
    turn INTEGER PRIMARY KEY,
    proposed_at REAL NOT NULL,
    finished_at REAL,
    n_proposed INTEGER NOT NULL,
    n_rejected INTEGER NOT NULL,
    rejections TEXT NOT NULL,          -- JSON {diagnostic code: count}
    tokens INTEGER NOT NULL,
    agent_notes TEXT NOT NULL          -- JSON list of what the agent reported (errors, repairs)
);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY,            -- proposal order across the run
    turn INTEGER NOT NULL REFERENCES turns(turn),
    ir_hash TEXT NOT NULL,
    ir_text TEXT NOT NULL,
    name TEXT NOT NULL,
    parents TEXT NOT NULL,             -- JSON list of candidate ids
    agent TEXT NOT NULL,
    mutation TEXT NOT NULL,
    status TEXT NOT NULL,
    diagnostics TEXT NOT NULL,         -- JSON list of Diagnostic.to_json()
    features TEXT NOT NULL,            -- JSON {feature: value} for the population
    predicted_ms REAL,
    rank INTEGER,
    tokens INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS candidates_turn ON candidates(turn);
CREATE INDEX IF NOT EXISTS candidates_hash ON candidates(ir_hash);
CREATE TABLE IF NOT EXISTS evaluations (
    candidate_id INTEGER PRIMARY KEY REFERENCES candidates(id),   -- at most one finished evaluation
    status TEXT NOT NULL,
    verdict TEXT,                      -- JSON, the verifier's Verdict
    replay_tokens TEXT NOT NULL,       -- JSON list
    timings TEXT NOT NULL,             -- JSON {name: value}
    measured_ms REAL,
    baseline_ms REAL,
    fitness REAL,
    fitness_kind TEXT,
    error TEXT,
    worker TEXT,
    seconds REAL NOT NULL,
    finished_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL
);
"""


class CandidateStatus(enum.Enum):
    """Where a candidate ended up. Set at proposal time, then replaced once by its evaluation."""

    UNPARSABLE = "unparsable"  # the agent's text is not IR (parse diagnostics stored)
    REJECTED = "rejected"  # the static checker found errors
    DUPLICATE = "duplicate"  # same IR hash as an earlier candidate of this run
    NOT_SELECTED = "not_selected"  # checked clean, ranked below the top m of its turn
    QUEUED = "queued"  # selected for evaluation, not yet evaluated
    PASSED = "passed"  # evaluated, every gate passed
    FAILED = "failed"  # evaluated, a gate failed (or timed out, or the kernel raised)
    ERROR = "error"  # could not be evaluated: lowering or loading failed
    # A bug in CAKE (a check, pass or generator crashed on this candidate): neither a rejection by a check nor a
    # verdict on the kernel. The report (what failed, how to report it) is its one diagnostic, code `internal`.
    INTERNAL = "error: internal"

    @property
    def evaluated(self) -> bool:
        return self in (CandidateStatus.PASSED, CandidateStatus.FAILED, CandidateStatus.ERROR,
                        CandidateStatus.INTERNAL)


class FitnessKind(enum.Enum):
    MEASURED = "measured"  # timed on a GPU against the baseline, interleaved
    MODEL = "model"  # no GPU: the cost model's predicted speedup, not a timing


def ir_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def internal_diagnostic(report: str) -> Mapping[str, Any]:
    """The one stored diagnostic of an `error: internal` candidate: the InternalError's report (what failed and
    how to report it). Its code `internal` is never counted as a rejection."""
    return {"code": "internal", "severity": "internal", "message": report}


@dataclass(frozen=True, slots=True)
class NewCandidate:
    """A candidate as proposed, checked and ranked — written with its turn."""

    ir_hash: str
    ir_text: str
    name: str
    parents: tuple[int, ...]
    agent: str
    mutation: str
    status: CandidateStatus
    diagnostics: tuple[Mapping[str, Any], ...] = ()
    features: Mapping[str, Any] = field(default_factory=dict)
    predicted_ms: float | None = None
    rank: int | None = None
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The outcome of evaluating one queued candidate."""

    status: CandidateStatus
    verdict: Mapping[str, Any] | None
    replay_tokens: tuple[str, ...]
    timings: Mapping[str, float]
    measured_ms: float | None
    baseline_ms: float | None
    fitness: float | None
    fitness_kind: FitnessKind | None
    error: str | None
    worker: str
    seconds: float


@dataclass(frozen=True, slots=True)
class Retime:
    """A candidate that became the best, timed again in a fresh process before it is reported as the best.

    `fitness` is the fresh process's speedup over the best baseline (None when undefined: `error` says why);
    `samples` names the bench JSON beside the candidate that holds every sample of that process."""

    candidate_id: int
    fitness: float | None
    measured_ms: float | None
    baseline_ms: float | None
    error: str | None = None
    samples: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"candidate_id": self.candidate_id, "fitness": self.fitness, "measured_ms": self.measured_ms,
                "baseline_ms": self.baseline_ms, "error": self.error, "samples": self.samples}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Retime:
        return Retime(int(data["candidate_id"]), data.get("fitness"), data.get("measured_ms"), data.get("baseline_ms"),
                      data.get("error"), data.get("samples"))


@dataclass(frozen=True, slots=True)
class CandidateRow:
    """A stored candidate with its evaluation, if any."""

    id: int
    turn: int
    ir_hash: str
    ir_text: str
    name: str
    parents: tuple[int, ...]
    agent: str
    mutation: str
    status: CandidateStatus
    diagnostics: tuple[Mapping[str, Any], ...]
    features: Mapping[str, Any]
    predicted_ms: float | None
    rank: int | None
    tokens: int
    evaluation: Evaluation | None

    @property
    def fitness(self) -> float | None:
        return self.evaluation.fitness if self.evaluation else None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id, "turn": self.turn, "ir_hash": self.ir_hash, "name": self.name,
            "parents": list(self.parents), "agent": self.agent, "mutation": self.mutation,
            "status": self.status.value, "diagnostic_codes": [d.get("code") for d in self.diagnostics],
            "features": dict(self.features), "predicted_ms": self.predicted_ms, "rank": self.rank,
            "tokens": self.tokens,
        }
        ev = self.evaluation
        data["evaluation"] = None if ev is None else {
            "status": ev.status.value, "measured_ms": ev.measured_ms, "baseline_ms": ev.baseline_ms,
            "fitness": ev.fitness, "fitness_kind": ev.fitness_kind.value if ev.fitness_kind else None,
            "replay_tokens": list(ev.replay_tokens), "timings": dict(ev.timings), "error": ev.error,
            "worker": ev.worker, "seconds": ev.seconds,
            "failed_gates": _failed_gates(ev.verdict),
        }
        return data


def _failed_gates(verdict: Mapping[str, Any] | None) -> list[str]:
    if not verdict:
        return []
    return [g["gate_id"] for g in verdict.get("gates", ()) if g.get("status") not in ("PASS", "SKIP")]


@dataclass(frozen=True, slots=True)
class TurnRow:
    turn: int
    proposed_at: float
    finished_at: float | None
    n_proposed: int
    n_rejected: int
    rejections: Mapping[str, int]
    tokens: int
    agent_notes: tuple[str, ...]


class RunExistsError(Exception):
    """`create` was asked for a directory that already holds a run."""


class NotARunError(Exception):
    """The directory holds no run database."""


class RunStore:
    """A run directory. Open with `RunStore.create(path, config)` or `RunStore.open(path)`."""

    def __init__(self, root: Path, conn: sqlite3.Connection):
        self.root = root
        self._conn = conn

    # ------------------------------------------------------------------------------------ lifecycle

    @staticmethod
    def create(root: Path | str, config: Mapping[str, Any]) -> RunStore:
        root = Path(root)
        if (root / DB_NAME).exists():
            raise RunExistsError(f"{root} already holds a run; use --resume {root} to continue it")
        root.mkdir(parents=True, exist_ok=True)
        (root / "candidates").mkdir(exist_ok=True)
        store = RunStore(root, _connect(root / DB_NAME))
        store._conn.executescript(_SCHEMA)  # DDL outside _tx: executescript commits on its own
        with store._tx() as cur:
            cur.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            cur.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(dict(config), sort_keys=True),))
            cur.execute("INSERT INTO meta VALUES ('created_at', ?)", (repr(time.time()),))
        (root / CONFIG_NAME).write_text(json.dumps(dict(config), indent=2, sort_keys=True) + "\n")
        return store

    @staticmethod
    def open(root: Path | str) -> RunStore:
        root = Path(root)
        if not (root / DB_NAME).is_file():
            raise NotARunError(f"{root} is not a run directory (no {DB_NAME})")
        return RunStore(root, _connect(root / DB_NAME))

    @staticmethod
    def open_read_only(root: Path | str) -> RunStore:
        """Open a run to read it without writing a byte next to it (`cake report` on committed data).

        A closed run (no `-wal` file: SQLite checkpoints the log into the database on the last close) is
        opened `immutable`, so SQLite creates no `-wal`/`-shm` files; a live run's log holds committed
        evaluations, so it is opened `mode=ro` (SQLite then shares the live run's `-shm`). Writes raise
        sqlite3.OperationalError."""
        root = Path(root)
        db = root / DB_NAME
        if not db.is_file():
            raise NotARunError(f"{root} is not a run directory (no {DB_NAME})")
        live = db.with_name(db.name + "-wal").exists()
        uri = f"{db.resolve().as_uri()}?mode=ro" + ("" if live else "&immutable=1")
        store = RunStore(root, sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0))
        if store._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
            store.close()
            raise NotARunError(f"{db} holds no run tables: an empty database (a run copied or committed while its "
                               f"evaluations were still in its write-ahead log, {DB_NAME}-wal, keeps none of them)")
        return store

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Cursor]:
        """One transaction: committed on success, rolled back on any exception (then re-raised)."""
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:  # a KeyboardInterrupt mid-turn must roll back too; re-raised below
            self._conn.rollback()
            raise
        self._conn.commit()

    # ------------------------------------------------------------------------------------ config

    @property
    def config(self) -> dict[str, Any]:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
        return dict(json.loads(row[0]))

    def meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._tx() as cur:
            cur.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (key, value))

    def log(self, kind: str, detail: str) -> None:
        with self._tx() as cur:
            cur.execute("INSERT INTO events (at, kind, detail) VALUES (?, ?, ?)", (time.time(), kind, detail))

    def events(self, kind: str | None = None) -> list[tuple[float, str, str]]:
        query = "SELECT at, kind, detail FROM events" + (" WHERE kind = ?" if kind else "") + " ORDER BY id"
        return [(float(a), str(k), str(d)) for a, k, d in self._conn.execute(query, (kind,) if kind else ())]

    def record_retime(self, retime: Retime) -> None:
        """Kept as an event (one per re-timing, in order): the evaluation row keeps the first timing."""
        self.log(RETIME_EVENT, json.dumps(retime.to_json(), sort_keys=True))

    def retimes(self) -> dict[int, Retime]:
        """The latest re-timing of each candidate that was re-timed."""
        out: dict[int, Retime] = {}
        for _, _, detail in self.events(RETIME_EVENT):
            retime = Retime.from_json(json.loads(detail))
            out[retime.candidate_id] = retime
        return out

    # ------------------------------------------------------------------------------------ writes

    def record_turn(self, turn: int, candidates: Sequence[NewCandidate], *, tokens: int,
                    agent_notes: Sequence[str] = ()) -> list[int]:
        """Write a turn's proposals in one transaction; returns their ids in proposal order."""
        rejections: dict[str, int] = {}
        for cand in candidates:
            if cand.status in (CandidateStatus.REJECTED, CandidateStatus.UNPARSABLE):
                for code in sorted({str(d.get("code")) for d in cand.diagnostics if d.get("severity") == "error"}):
                    rejections[code] = rejections.get(code, 0) + 1
        n_rejected = sum(c.status in (CandidateStatus.REJECTED, CandidateStatus.UNPARSABLE) for c in candidates)
        for cand in candidates:  # artifacts first: a crash leaves an orphan file, never a row without text
            path = self.root / "candidates" / f"{cand.ir_hash}.cake"
            if not path.exists():
                path.write_text(cand.ir_text)
        ids: list[int] = []
        now = time.time()
        with self._tx() as cur:
            cur.execute("INSERT INTO turns VALUES (?, ?, NULL, ?, ?, ?, ?, ?)",
                        (turn, now, len(candidates), n_rejected, json.dumps(rejections, sort_keys=True), tokens,
                         json.dumps(list(agent_notes))))
            for cand in candidates:
                cur.execute(
                    "INSERT INTO candidates (turn, ir_hash, ir_text, name, parents, agent, mutation, status,"
                    " diagnostics, features, predicted_ms, rank, tokens, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (turn, cand.ir_hash, cand.ir_text, cand.name, json.dumps(list(cand.parents)), cand.agent,
                     cand.mutation, cand.status.value, json.dumps([dict(d) for d in cand.diagnostics]),
                     json.dumps(dict(cand.features), sort_keys=True), cand.predicted_ms, cand.rank, cand.tokens,
                     now))
                ids.append(int(cur.lastrowid or 0))
        return ids

    def record_evaluation(self, candidate_id: int, ev: Evaluation) -> None:
        """Write one evaluation in its own transaction. A second evaluation of the same candidate is an
        IntegrityError: the store refuses to repeat a finished evaluation."""
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (candidate_id, ev.status.value, json.dumps(ev.verdict) if ev.verdict is not None else None,
                 json.dumps(list(ev.replay_tokens)), json.dumps(dict(ev.timings), sort_keys=True),
                 ev.measured_ms, ev.baseline_ms, ev.fitness, ev.fitness_kind.value if ev.fitness_kind else None,
                 ev.error, ev.worker, ev.seconds, time.time()))
            cur.execute("UPDATE candidates SET status = ? WHERE id = ?", (ev.status.value, candidate_id))

    def finish_turn(self, turn: int) -> None:
        with self._tx() as cur:
            cur.execute("UPDATE turns SET finished_at = ? WHERE turn = ? AND finished_at IS NULL", (time.time(), turn))

    # ------------------------------------------------------------------------------------ reads

    def turns(self) -> list[TurnRow]:
        rows = self._conn.execute("SELECT * FROM turns ORDER BY turn").fetchall()
        return [TurnRow(int(r[0]), float(r[1]), None if r[2] is None else float(r[2]), int(r[3]), int(r[4]),
                        json.loads(r[5]), int(r[6]), tuple(json.loads(r[7]))) for r in rows]

    def turn(self, turn: int) -> TurnRow | None:
        return next((t for t in self.turns() if t.turn == turn), None)

    def candidates(self, *, turn: int | None = None, status: CandidateStatus | None = None) -> list[CandidateRow]:
        """Candidates in proposal order, with their evaluations."""
        query = ("SELECT c.id, c.turn, c.ir_hash, c.ir_text, c.name, c.parents, c.agent, c.mutation, c.status,"
                 " c.diagnostics, c.features, c.predicted_ms, c.rank, c.tokens,"
                 " e.status, e.verdict, e.replay_tokens, e.timings, e.measured_ms, e.baseline_ms, e.fitness,"
                 " e.fitness_kind, e.error, e.worker, e.seconds"
                 " FROM candidates c LEFT JOIN evaluations e ON e.candidate_id = c.id")
        where: list[str] = []
        args: list[object] = []
        if turn is not None:
            where.append("c.turn = ?")
            args.append(turn)
        if status is not None:
            where.append("c.status = ?")
            args.append(status.value)
        if where:
            query += " WHERE " + " AND ".join(where)
        query += " ORDER BY c.id"
        return [_candidate_row(r) for r in self._conn.execute(query, args)]

    def candidate(self, candidate_id: int) -> CandidateRow:
        rows = [c for c in self.candidates() if c.id == candidate_id]
        if not rows:
            raise KeyError(f"no candidate {candidate_id}")
        return rows[0]

    def evaluation_times(self) -> dict[int, float]:
        """When each finished evaluation was committed (epoch seconds), by candidate id."""
        return {int(i): float(t) for i, t in self._conn.execute("SELECT candidate_id, finished_at FROM evaluations")}

    def evaluation_count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0])

    def total_tokens(self) -> int:
        return int(self._conn.execute("SELECT COALESCE(SUM(tokens), 0) FROM turns").fetchone()[0])

    def seen_hashes(self) -> set[str]:
        return {str(r[0]) for r in self._conn.execute("SELECT DISTINCT ir_hash FROM candidates")}


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE in _tx), nothing implicit.
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")  # a committed evaluation survives kill -9 and power loss
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _candidate_row(r: Sequence[Any]) -> CandidateRow:
    evaluation = None
    if r[14] is not None:
        evaluation = Evaluation(
            status=CandidateStatus(r[14]), verdict=json.loads(r[15]) if r[15] else None,
            replay_tokens=tuple(json.loads(r[16])), timings=json.loads(r[17]), measured_ms=r[18],
            baseline_ms=r[19], fitness=r[20], fitness_kind=FitnessKind(r[21]) if r[21] else None,
            error=r[22], worker=str(r[23]), seconds=float(r[24]))
    return CandidateRow(
        id=int(r[0]), turn=int(r[1]), ir_hash=str(r[2]), ir_text=str(r[3]), name=str(r[4]),
        parents=tuple(json.loads(r[5])), agent=str(r[6]), mutation=str(r[7]), status=CandidateStatus(r[8]),
        diagnostics=tuple(json.loads(r[9])), features=json.loads(r[10]), predicted_ms=r[11], rank=r[12],
        tokens=int(r[13]), evaluation=evaluation)
