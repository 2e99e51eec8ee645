"""Agent trajectories as they are published, read into one typed corpus (docs/workloads.md, "Trajectories").

A trajectory is a list of steps; step k is one request of the agent: the new input it adds to the history
(a token count, or text), the output the agent produced (its length, and for MLCommons its text), and the
tool delay before it (from the end of the previous answer). Three published formats:

- `mlcommons`: MLCommons Endpoints' agentic dataset, JSONL, one row per message (`conversation_id`, `turn`,
  `role` user | assistant | tool, `content`, `system`, `tool_calls`, `tool_results`, `reasoning_content`,
  `delay_seconds`, `max_new_tokens`). The client rows before an assistant row are one step's new input; the
  assistant row is its output.
- `mooncake`: AIPerf's multi-turn Mooncake JSONL, one row per turn (`session_id`, `input_length` new tokens
  or `text_input`, `output_length`, `delay` ms, `hash_ids`); rows without a session are single-turn.
- `weka`: the kv-cache-tester traces InferenceX AgentX replays through AIPerf: one JSON object per trace
  (`id`, `block_size`, `requests` of `t`, `type` n | s | subagent, `in` = the whole prompt, `out`,
  `api_time`, `think_time`, `hash_ids`). A step's new input is its prompt less the history (the previous
  prompt and output); the delay is `think_time`, else the idle gap `t - (t_prev + api_time_prev)`, as AIPerf
  replays it. A request whose prompt does not extend the history (another model, a compacted context) starts
  a new chain; a subagent's requests are chains of their own: every request is replayed, each chain stated.

Nothing is dropped here: a trajectory the reader cannot replay is kept with its cause (`Trajectory.problem`),
and the corpus' SHA-256 names exactly what was read."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenbench.errors import UsageError

Format = str            # "mlcommons" | "mooncake" | "weka" | "generated"
FORMATS = ("mlcommons", "mooncake", "weka")
FIX = "--dataset-path FILE of MLCommons agentic JSONL, AIPerf multi-turn Mooncake JSONL or Weka JSON traces"


@dataclass(frozen=True)
class Step:
    """One request of an agent: the new input it adds to the history, its output, the tool delay before it."""

    new: int | str                     # new input: a token count (fresh content), or text (tokenized)
    output: int | None                 # the agent's output tokens; None: counted from `reply`'s text
    reply: str | None = None           # the recorded answer's text (mlcommons): the history's with fixed replies
    delay_s: float = 0.0               # tool delay: from the previous answer's end to this request
    hash_ids: tuple[int, ...] = ()     # mooncake: the new input's blocks (equal ids, equal blocks)


@dataclass(frozen=True)
class Trajectory:
    id: str
    steps: tuple[Step, ...]
    system: int | str | None = None    # the system prompt: a token count, or text
    problem: str = ""                  # why it cannot be replayed ("" : it can)
    chain: str = ""                    # weka: why this chain is apart from the trace's first one


@dataclass(frozen=True)
class Corpus:
    trajectories: tuple[Trajectory, ...]
    format: Format
    sha256: str                        # of the bytes read (a folder: its files' names and bytes, sorted)
    block_size: int | None = None      # the hash_ids' block, tokens (mooncake: --trace-block-size; weka: the file's)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(path.rglob("*.json*")) if path.is_dir() else [path]:
        h.update(f.relative_to(path).as_posix().encode() if path.is_dir() else b"")
        h.update(f.read_bytes())
    return h.hexdigest()


def _records(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, JSON value): a folder's .json files, a whole-file JSON value (an array: each element), or JSONL."""
    if path.is_dir():
        for f in sorted(path.rglob("*.json")):
            yield from _records(f)
        return
    if not path.is_file():
        raise UsageError(f"trajectories file '{path}' not found", f"pass a local {FIX} (nothing is downloaded)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})", FIX) from None
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if whole is not None:
        items = whole if isinstance(whole, list) else [whole]
        yield from ((f"{path}[{i}]", v) for i, v in enumerate(items, 1))
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield f"{path}:{n}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{n}: not valid JSON ({exc.msg})", FIX) from None


def detect(record: Any, where: str) -> Format:
    """A record's format by its fields."""
    if isinstance(record, dict):
        if "requests" in record:
            return "weka"
        if "conversation_id" in record and "role" in record:
            return "mlcommons"
        if "input_length" in record or "text_input" in record:
            return "mooncake"
    raise UsageError(f"{where}: not a trajectory record of a known format (no 'requests', 'conversation_id' + "
                     "'role', or 'input_length' / 'text_input')", FIX)


def read_corpus(path_text: str, fmt: str = "auto", block_size: int | None = None) -> Corpus:
    """Every trajectory of the file (or folder), in file order, with the corpus' hash."""
    path = Path(path_text)
    records = list(_records(path))
    if not records:
        raise UsageError(f"{path}: no trajectories in it", FIX)
    found = detect(records[0][1], records[0][0]) if fmt == "auto" else fmt
    reader = {"mlcommons": _mlcommons, "mooncake": _mooncake, "weka": _weka}[found]
    trajectories, size = reader(records)
    return Corpus(tuple(trajectories), found, sha256_of(path), size if found == "weka" else block_size)


# ---- MLCommons Endpoints: one row per message ----

def _text(row: dict) -> str:
    """A client row's new input: the user's content, or the tool results' contents."""
    if row.get("role") == "tool":
        results = row.get("tool_results") or []
        return "\n".join(str(r.get("content", "")) for r in results if isinstance(r, dict))
    return str(row.get("content") or "")


def _answer(row: dict) -> str:
    """What the agent produced in an assistant row: its reasoning, its text and its tool calls."""
    parts = [str(row.get(k)) for k in ("reasoning_content", "content") if row.get(k)]
    parts += [json.dumps(c.get("function", c), sort_keys=True) for c in row.get("tool_calls") or []
              if isinstance(c, dict)]
    return "\n".join(parts)


def _conversations(records: list[tuple[str, Any]]) -> dict[str, list[tuple[str, dict]]]:
    out: dict[str, list[tuple[str, dict]]] = {}
    for where, row in records:
        if not isinstance(row, dict) or row.get("_type") == "dataset_metadata":
            continue
        if "conversation_id" not in row or "role" not in row:
            raise UsageError(f"{where}: an MLCommons row needs 'conversation_id' and 'role'", FIX)
        out.setdefault(str(row["conversation_id"]), []).append((where, row))
    return out


def _mlcommons_one(cid: str, rows: list[tuple[str, dict]]) -> Trajectory:
    rows = sorted(rows, key=lambda wr: int(wr[1].get("turn", 0)))
    system = next((r["system"] for _, r in rows if isinstance(r.get("system"), str) and r["system"]), None)
    steps: list[Step] = []
    pending: list[dict] = []
    for _, row in rows:
        if row["role"] in ("user", "tool"):
            pending.append(row)
        elif row["role"] == "assistant" and pending:
            delay = float(pending[0].get("delay_seconds") or 0.0) if steps else 0.0
            steps.append(Step("\n".join(_text(r) for r in pending), None, _answer(row), delay))
            pending = []
    if pending:                               # the last client turn has no recorded answer
        limit = pending[-1].get("max_new_tokens") or pending[-1].get("max_completion_tokens")
        delay = float(pending[0].get("delay_seconds") or 0.0) if steps else 0.0
        steps.append(Step("\n".join(_text(r) for r in pending), int(limit) if limit else None, None, delay))
        if not limit:
            return Trajectory(cid, tuple(steps), system, f"its last turn ({len(steps)}) has no recorded answer to "
                                                         "take the output length from (and no max_new_tokens)")
    return Trajectory(cid, tuple(steps), system)


def _mlcommons(records: list[tuple[str, Any]]) -> tuple[list[Trajectory], None]:
    return [_mlcommons_one(cid, rows) for cid, rows in _conversations(records).items()], None


# ---- AIPerf's multi-turn Mooncake: one row per turn ----

def _mooncake_step(row: dict, where: str, first: bool) -> tuple[Step, str]:
    new: int | str | None = row.get("text_input") if row.get("text_input") is not None else row.get("input_length")
    if not isinstance(new, (int, str)) or isinstance(new, bool) or (isinstance(new, int) and new < 1):
        raise UsageError(f"{where}: 'input_length' is {row.get('input_length')!r}, not a positive integer", FIX)
    out = row.get("output_length")
    ids = row.get("hash_ids") or []
    if not isinstance(ids, list) or any(type(h) is not int for h in ids):
        raise UsageError(f"{where}: 'hash_ids' is {ids!r}, not a list of integers", FIX)
    delay = 0.0 if first else float(row.get("delay") or 0) / 1000
    problem = "" if isinstance(out, int) and out > 0 else f"a turn ({where}) has no output_length"
    return Step(new, out if isinstance(out, int) and out > 0 else None, None, delay, tuple(ids)), problem


def _mooncake(records: list[tuple[str, Any]]) -> tuple[list[Trajectory], None]:
    groups: dict[str, list[tuple[str, dict]]] = {}
    for i, (where, row) in enumerate(records):
        if not isinstance(row, dict):
            raise UsageError(f"{where}: a Mooncake row is a JSON object", FIX)
        groups.setdefault(str(row.get("session_id") or f"row-{i + 1}"), []).append((where, row))
    out = []
    for sid, rows in groups.items():
        made = [_mooncake_step(row, where, k == 0) for k, (where, row) in enumerate(rows)]
        problem = next((p for _, p in made if p), "")
        out.append(Trajectory(sid, tuple(s for s, _ in made), None, problem))
    return out, None


# ---- Weka / kv-cache-tester (InferenceX AgentX) ----

def _num(req: dict, key: str, where: str) -> int:
    value = req.get(key)
    if type(value) is not int or value < 0:
        raise UsageError(f"{where}: a Weka request's '{key}' is {value!r}, not a token count", FIX)
    return value


def _delay(req: dict, prev: dict | None) -> float:
    """The tool delay before `req`: its think_time, else the idle gap since the previous request ended."""
    if prev is None:
        return 0.0
    if isinstance(req.get("think_time"), (int, float)):
        return max(0.0, float(req["think_time"]))
    api = prev.get("api_time")
    spent = float(api) if isinstance(api, (int, float)) else 0.0
    return max(0.0, float(req.get("t", 0.0)) - float(prev.get("t", 0.0)) - spent)


def _lcp(a: list, b: list) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _chains(requests: list[dict], where: str) -> list[list[tuple[dict, int]]]:
    """Requests as chains, each request continuing the chain whose history (its last prompt and output) its
    prompt extends, the one sharing the most leading hash_ids with it first, then the same model, then the
    latest; a request that extends none starts a chain: [(request, new tokens)]."""
    chains: list[list[tuple[dict, int]]] = []
    histories: list[int] = []
    for req in requests:
        prompt, out = _num(req, "in", where), max(1, _num(req, "out", where))
        fits = [i for i, h in enumerate(histories) if h <= prompt]
        if fits:
            last = [chains[i][-1][0] for i in fits]
            best = max(range(len(fits)), key=lambda j: (_lcp(last[j].get("hash_ids") or [], req.get("hash_ids") or []),
                                                         last[j].get("model") == req.get("model"), fits[j]))
            i = fits[best]
            chains[i].append((req, prompt - histories[i]))
        else:
            i = len(chains)
            chains.append([(req, prompt)])
            histories.append(0)
        histories[i] = prompt + out
    return chains


def _weka_trajectories(tid: str, requests: list[dict], where: str, what: str) -> list[Trajectory]:
    out = []
    for n, chain in enumerate(_chains(requests, where)):
        steps = tuple(Step(new, max(1, _num(req, "out", where)), None, _delay(req, chain[k - 1][0] if k else None))
                      for k, (req, new) in enumerate(chain))
        why = "" if n == 0 else f"chain {n + 1} of {what}: its first prompt does not extend the history before it"
        out.append(Trajectory(tid if n == 0 else f"{tid}#{n + 1}", steps, None, "", why))
    return out


def _weka_one(trace: Any, where: str) -> list[Trajectory]:
    if not isinstance(trace, dict) or not isinstance(trace.get("requests"), list):
        raise UsageError(f"{where}: a Weka trace is an object with 'requests'", FIX)
    tid = str(trace.get("id", where))
    top = [r for r in trace["requests"] if isinstance(r, dict) and r.get("type") != "subagent"]
    out = _weka_trajectories(tid, top, where, f"trace {tid}")
    for sub in (r for r in trace["requests"] if isinstance(r, dict) and r.get("type") == "subagent"):
        inner = [r for r in sub.get("requests") or [] if isinstance(r, dict)]
        sid = f"{tid}/{sub.get('agent_id', len(out))}"
        made = _weka_trajectories(sid, inner, where, f"subagent {sid}")
        out += [t if t.chain else Trajectory(t.id, t.steps, None, "", f"subagent of {tid}, replayed apart")
                for t in made]
    return out


def _weka(records: list[tuple[str, Any]]) -> tuple[list[Trajectory], int | None]:
    out: list[Trajectory] = []
    size = None
    for where, trace in records:
        out += _weka_one(trace, where)
        size = trace.get("block_size", size) if isinstance(trace, dict) else size
    return out, size if isinstance(size, int) else None
