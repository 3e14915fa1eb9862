# ruff: noqa: RUF002
"""Run the suite: every case on both libraries, interleaved, repeated; print and save the results.

    python -m bench.run                # the full suite (< 10 minutes on 2 cores)
    python -m bench.run --quick        # a 1-minute smoke run
    python -m bench.run --only 'a.*'   # some cases (fnmatch on the case key, comma-separated)
    python -m bench.run --profile c.10mb.sqlite   # cProfile top-N of threadline on one case
    python -m bench.run --list         # the case keys

From Python (e.g. a test): ``bench.run.run_suite(quick=True, json_path=None)`` returns the
report as a dict; LangGraph columns are marked missing when it is not importable.

Per case, each library's ``factory`` prepares once (savers, long threads), then each repetition
calls ``measure()`` for both libraries in turn, alternating who goes first. A library's failure
(exception, wrong result, time-out) is recorded with its traceback and shown in the table; the
other library goes on. Figures are the median of the repetitions, with min–max.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime
import fnmatch
import gc
import io
import json
import os
import platform
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from bench.backends import BackendUnavailable, Env
from bench.floor import FLOOR
from bench.libs import LOADERS, Lib, LibraryMissing
from bench.measures import FULL, QUICK, Case, Metric, Scale
from bench.report import LIBS, markdown, num
from bench.suite import cases

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_JSON = os.path.join(ROOT, "bench", "results", "latest.json")


class BenchTimeout(Exception):
    """A prepare or measure call ran longer than its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise ``BenchTimeout`` in the main thread after ``seconds`` (no-op in other threads)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise BenchTimeout(f"no result after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ------------------------------------------------------------------------------ results


@dataclass
class LibRun:
    """One library on one case: its figures per metric, or why there are none."""

    status: str = "ok"  # ok | failed | unavailable | missing | skipped
    reason: str | None = None
    traceback: str | None = None
    values: dict[str, list[float]] = field(default_factory=dict)

    def fail(self, exc: BaseException) -> None:
        self.status = "unavailable" if isinstance(exc, BackendUnavailable) else "failed"
        self.reason = f"{type(exc).__name__}: {exc}"
        if self.status == "failed":
            self.traceback = "".join(traceback.format_exception(exc))
            where = _library_frame(exc)
            if where:
                self.reason += f" (at {where})"


def _library_frame(exc: BaseException) -> str | None:
    """The innermost frame inside a library under test (not the harness), as file:line."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = frame.filename.replace(os.sep, "/")
        for marker in ("/threadline/", "/langgraph/"):
            if marker in path:
                found = (
                    f"{marker.strip('/')}/{path.split(marker, 1)[1]}:{frame.lineno} {frame.name}"
                )
    return found


def summary(values: Sequence[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "values": list(values),
    }


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError):
        info["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        kb = int(f.readline().split()[1])
        info["memory_gib"] = round(kb / 2**20, 1)
    return info


def _git(*args: str) -> str | None:
    try:  # read-only queries
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _library_info(lib: Lib | None, reason: str | None) -> dict[str, Any]:
    if lib is None:
        return {"missing": reason}
    info: dict[str, Any] = {"version": lib.version}
    module = sys.modules.get(lib.name)
    if module is not None:
        file = getattr(module, "__file__", None)
        paths = list(getattr(module, "__path__", []))  # namespace packages have no __file__
        info["path"] = os.path.dirname(file) if file else (paths[0] if paths else None)
    if lib.name == "threadline":
        info["commit"] = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--", "threadline")
        info["uncommitted_changes"] = bool(dirty) if dirty is not None else None
    return info


# ------------------------------------------------------------------------------ running


class Suite:
    def __init__(
        self,
        scale: Scale,
        libs: Sequence[str],
        env: Env,
        log: TextIO,
        timeout: float,
        budget: float | None,
    ):
        self.scale = scale
        self.env = env
        self.log = log
        self.timeout = timeout
        self.budget = budget
        self.started = time.perf_counter()
        self.libs: dict[str, Lib | None] = {}
        self.missing: dict[str, str] = {}
        self.timed_out = False
        for name in libs:
            try:
                self.libs[name] = LOADERS[name]()
            except LibraryMissing as exc:
                self.libs[name] = None
                self.missing[name] = str(exc)
            except Exception as exc:  # threadline itself may be broken mid-edit
                self.libs[name] = None
                self.missing[name] = "".join(traceback.format_exception(exc))

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def say(self, text: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {text}", file=self.log, flush=True)

    def floor(self) -> list[dict[str, Any]]:
        out = []
        values: dict[str, list[float]] = {k: [] for k in FLOOR}
        errors: dict[str, str] = {}
        for _ in range(self.scale.reps):
            for key, (_label, _unit, fn) in FLOOR.items():
                if key in errors:
                    continue
                try:
                    with time_limit(self.timeout):
                        values[key].append(fn(self.env, self.scale.floor_ops))
                except Exception as exc:
                    errors[key] = f"{type(exc).__name__}: {exc}"
                    self.timed_out |= isinstance(exc, BenchTimeout)
        for key, (label, unit, _fn) in FLOOR.items():
            s = summary(values[key])
            out.append(
                {
                    "key": key,
                    "label": label,
                    "unit": unit,
                    "error": errors.get(key),
                    **({"median": None} if s is None else s),
                }
            )
            shown = errors.get(key) or f"{s['median']:.3g} {unit}"  # type: ignore[index]
            self.say(f"floor {key}: {shown}")
        return out

    def run_case(self, case: Case) -> dict[str, LibRun]:
        runs = {name: LibRun() for name in self.libs if name in case.libs}
        if self.budget is not None and self.elapsed() > self.budget:
            for run in runs.values():
                run.status, run.reason = "skipped", "the suite's time budget was used up"
            return runs
        stacks: dict[str, contextlib.ExitStack] = {}
        measures = {}
        try:
            for name, run in runs.items():
                lib = self.libs[name]
                if lib is None:
                    run.status, run.reason = "missing", self.missing[name].splitlines()[-1]
                    continue
                stack = contextlib.ExitStack()
                try:
                    with time_limit(self.timeout):
                        measures[name] = stack.enter_context(
                            case.factory(lib, self.env, self.scale)
                        )
                    stacks[name] = stack
                except BaseException as exc:
                    if not isinstance(exc, Exception | BenchTimeout):
                        raise
                    run.fail(exc)
                    self.timed_out |= isinstance(exc, BenchTimeout)
            order = list(measures)
            for rep in range(self.scale.reps):
                if rep > 0 and self.budget is not None and self.elapsed() > self.budget:
                    self.say(f"{case.key}: time budget used up, stopping after {rep} rep(s)")
                    break
                for name in order if rep % 2 == 0 else reversed(order):
                    run = runs[name]
                    if run.status != "ok":
                        continue
                    gc.collect()
                    try:
                        with time_limit(self.timeout):
                            figures = measures[name]()
                    except Exception as exc:
                        run.fail(exc)
                        self.timed_out |= isinstance(exc, BenchTimeout)
                        continue
                    for key, value in figures.items():
                        run.values.setdefault(key, []).append(float(value))
        finally:
            for name, stack in stacks.items():
                try:
                    with time_limit(self.timeout):
                        stack.close()
                except Exception as exc:
                    if runs[name].status == "ok":
                        runs[name].fail(exc)
        return runs


def _metric_row(metric: Metric, runs: dict[str, LibRun]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "key": metric.key,
        "label": metric.label,
        "unit": metric.unit,
        "better": metric.better,
        "target": metric.target.text if metric.target else None,
    }
    medians: dict[str, float | None] = {}
    for name in LIBS:
        run = runs.get(name)
        s = summary(run.values.get(metric.key, [])) if run and run.status == "ok" else None
        row[name] = s
        medians[name] = s["median"] if s else None
    tl, lg = medians["threadline"], medians["langgraph"]
    row["ratio"] = tl / lg if tl is not None and lg else None
    row["met"] = metric.target.met(tl, lg) if metric.target else None
    return row


def run_suite(
    *,
    quick: bool = False,
    reps: int | None = None,
    only: str | None = None,
    libs: Sequence[str] = LIBS,
    json_path: str | None = DEFAULT_JSON,
    markdown_path: str | None = None,
    out: TextIO | None = None,
    log: TextIO | None = None,
    timeout: float | None = None,
    budget: float | None = None,
) -> dict[str, Any]:
    """Run the suite (or the cases matching ``only``) and return the report as a dict."""
    out = out if out is not None else sys.stdout
    log = log if log is not None else sys.stderr
    scale = QUICK if quick else FULL
    if reps is not None:
        scale = Scale(**{**asdict(scale), "reps": reps})
    timeout = timeout or (60.0 if quick else 150.0)
    if budget is None:  # keep the whole run under 1 / 10 minutes even on a busy machine
        budget = 50.0 if quick else 480.0
    selected = select(cases(scale), only)
    tmpdir = tempfile.mkdtemp(prefix="tlbench-")
    started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    suite = Suite(scale, libs, Env(tmpdir), log, timeout, budget)
    for name, reason in suite.missing.items():
        suite.say(f"{name} is not available: {reason.splitlines()[-1]}")
    report: dict[str, Any] = {
        "suite": "threadline bench",
        "command": " ".join(sys.argv) if sys.argv and sys.argv[0] else None,
        "quick": quick,
        "reps": scale.reps,
        "scale": asdict(scale),
        "started_at": started_at,
        "machine": machine(),
        "libraries": {n: _library_info(suite.libs.get(n), suite.missing.get(n)) for n in libs},
        "floor": [],
        "cases": [],
        "failures": [],
    }
    try:
        report["floor"] = suite.floor() if only is None else []
        for case in selected:
            runs = suite.run_case(case)
            row = {
                "key": case.key,
                "workload": case.workload,
                "label": case.label,
                "backend": case.backend,
                "status": {n: {"status": r.status, "reason": r.reason} for n, r in runs.items()},
                "reps_done": max(
                    (len(v) for r in runs.values() for v in r.values.values()), default=0
                ),
                "metrics": [_metric_row(m, runs) for m in case.metrics],
            }
            report["cases"].append(row)
            for name, run in runs.items():
                if run.status == "failed":
                    report["failures"].append(
                        {
                            "case": case.key,
                            "library": name,
                            "error": run.reason,
                            "traceback": run.traceback,
                        }
                    )
            suite.say(f"{case.key}: {_progress(row)}")
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    report["elapsed_s"] = round(suite.elapsed(), 1)
    with contextlib.suppress(OSError):
        report["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["timed_out"] = suite.timed_out
    text = markdown(report)
    print(text, file=out, flush=True)
    if json_path:
        os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1, default=str)
            f.write("\n")
        suite.say(f"saved {os.path.relpath(json_path, ROOT)}")
    if markdown_path:
        with open(markdown_path, "w") as f:
            f.write(text + "\n")
    return report


def select(all_cases: list[Case], only: str | None) -> list[Case]:
    if not only:
        return all_cases
    patterns = [p.strip() for p in only.split(",") if p.strip()]
    return [c for c in all_cases if any(fnmatch.fnmatchcase(c.key, p) for p in patterns)]


def _progress(row: dict[str, Any]) -> str:
    m = row["metrics"][0]
    parts = []
    for name in LIBS:
        st = row["status"].get(name)
        if st is None:
            continue
        parts.append(f"{name} " + (num(m[name]["median"]) if m.get(name) else st["status"]))
    return f"{m['label']}: " + " | ".join(parts)


def profile_case(
    key: str,
    *,
    quick: bool = False,
    top: int = 10,
    lib: str = "threadline",
    out: TextIO | None = None,
) -> str:
    """cProfile one repetition of one case on one library (after a warm-up repetition)."""
    out = out if out is not None else sys.stdout
    scale = QUICK if quick else FULL
    matches = select(cases(scale), key)
    if len(matches) != 1:
        raise SystemExit(f"--profile needs exactly one case key, {key!r} matches {len(matches)}")
    case = matches[0]
    tmpdir = tempfile.mkdtemp(prefix="tlbench-prof-")
    try:
        with case.factory(LOADERS[lib](), Env(tmpdir), scale) as measure:
            measure()
            profiler = cProfile.Profile()
            profiler.enable()
            figures = measure()
            profiler.disable()
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    buf = io.StringIO()
    buf.write(f"{case.key} on {lib}: {figures}\n")
    stats = pstats.Stats(profiler, stream=buf)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    text = buf.getvalue()
    print(text, file=out)
    return text


# ------------------------------------------------------------------------------ CLI


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a ~1-minute smoke run (1 rep, smaller)")
    p.add_argument("--reps", type=int, help="repetitions per case (default 5; 1 with --quick)")
    p.add_argument("--only", help="comma-separated fnmatch patterns on case keys, e.g. 'a.*,d.*'")
    p.add_argument("--libs", default=",".join(LIBS), help="threadline,langgraph (default both)")
    p.add_argument("--json", default=DEFAULT_JSON, help="where to save the JSON report")
    p.add_argument("--markdown", help="also write the Markdown table to this file")
    p.add_argument("--timeout", type=float, help="seconds allowed per prepare/measure call")
    p.add_argument(
        "--budget",
        type=float,
        help="seconds after which remaining cases are skipped (default 480; 50 with --quick)",
    )
    p.add_argument("--profile", metavar="CASE", help="cProfile threadline on one case, print top")
    p.add_argument("--top", type=int, default=10, help="rows in --profile output")
    p.add_argument("--list", action="store_true", help="list the case keys and exit")
    args = p.parse_args(argv)
    if args.list:
        for c in cases(QUICK if args.quick else FULL):
            print(f"{c.key:22} {c.workload} — {c.label}")
        return 0
    if args.profile:
        profile_case(args.profile, quick=args.quick, top=args.top)
        return 0
    report = run_suite(
        quick=args.quick,
        reps=args.reps,
        only=args.only,
        libs=[x.strip() for x in args.libs.split(",") if x.strip()],
        json_path=args.json,
        markdown_path=args.markdown,
        timeout=args.timeout,
        budget=args.budget,
    )
    if report.get("timed_out"):
        # A timed-out call may have left worker threads stuck; don't wait for them at exit.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
