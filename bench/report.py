# ruff: noqa: RUF001
"""The suite's report as the Markdown tables ``docs/performance.md`` pastes."""

from __future__ import annotations

from typing import Any

LIBS = ("threadline", "langgraph")
NAMES = {"threadline": "threadline", "langgraph": "LangGraph"}


def num(v: float | None) -> str:
    if v is None:
        return "–"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _bytes(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.2f} MB"
    if v >= 1e3:
        return f"{v / 1e3:.1f} KB"
    return f"{v:.0f} B"


def _value(v: float, unit: str) -> str:
    return _bytes(v) if unit == "bytes" else num(v)


def _cell(s: dict[str, Any] | None, unit: str, status: dict[str, Any] | None, ref: str) -> str:
    if s is not None:
        text = _value(s["median"], unit)
        if s["n"] > 1:
            text += f" ({_value(s['min'], unit)}–{_value(s['max'], unit)})"
        return text
    if status is None:
        return "–"
    if status["status"] == "failed":
        return f"**FAILED** [{ref}]"
    if status["status"] == "ok":
        return "–"
    return status["status"]


def _ratio(m: dict[str, Any]) -> str:
    r = m["ratio"]
    if r is None:
        return "–"
    text = f"{r:.3g}"
    if m["better"] == "info" or r == 0:
        return text
    if m["unit"] in ("us", "ms"):
        return text + (f" ({1 / r:.1f}× faster)" if r < 1 else f" ({r:.1f}× slower)")
    if m["unit"] == "steps/s":
        return text + (f" ({r:.1f}× more)" if r >= 1 else f" ({1 / r:.1f}× fewer)")
    if m["unit"] == "bytes":
        return text + (f" ({1 / r:.1f}× smaller)" if r < 1 else f" ({r:.1f}× larger)")
    return text


def _met(m: dict[str, Any], status: dict[str, Any] | None) -> str:
    if not m["target"]:
        return ""
    if m["met"] is True:
        return "✅ met"
    if m["met"] is False:
        return "❌ not met"
    if status and status["status"] == "failed":
        return "❌ failed"
    return "– not measured"


def markdown(report: dict[str, Any]) -> str:
    lines = []
    mc = report["machine"]
    libs = report["libraries"]
    lg = libs.get("langgraph", {})
    tl = libs.get("threadline", {})
    dirty = " + uncommitted changes" if tl.get("uncommitted_changes") else ""
    lines.append(
        f"threadline bench — {report['reps']} rep(s){' (quick)' if report['quick'] else ''}, "
        f"{report.get('elapsed_s', '?')} s; {mc.get('nproc')} CPUs ({mc.get('cpu', '?')}), "
        f"Python {mc['python']}; threadline {tl.get('version', '?')} "
        f"@ {tl.get('commit') or '?'}{dirty}, LangGraph {lg.get('version') or 'missing'}; "
        f"load average {_load(mc.get('loadavg_at_start'))} at start, "
        f"{_load(mc.get('loadavg_at_end'))} at end"
    )
    lines.append("")
    lines.append("Figures: median of the repetitions (min–max). Ratio = threadline / LangGraph.")
    lines.append("")
    if report["floor"]:
        lines.append("| machine floor | median (min–max) |")
        lines.append("|---|---|")
        for f in report["floor"]:
            unit = {"us": "µs", "ns": "ns"}.get(f["unit"], f["unit"])
            if f.get("error"):
                lines.append(f"| {f['label']} | unavailable: {f['error'][:80]} |")
            else:
                spread = f" ({num(f['min'])}–{num(f['max'])})" if f["n"] > 1 else ""
                lines.append(f"| {f['label']} | {num(f['median'])}{spread} {unit} |")
        lines.append("")
    lines.append("| workload | case | metric | threadline | LangGraph | ratio | target | met? |")
    lines.append("|---|---|---|---|---|---|---|---|")
    refs: dict[tuple[str, str], str] = {}
    notes: list[str] = []
    last = None
    for case in report["cases"]:
        for name, st in case["status"].items():
            if st["status"] in ("failed", "unavailable", "missing", "skipped"):
                ref = f"F{len(refs) + 1}" if st["status"] == "failed" else ""
                if ref:
                    refs[(case["key"], name)] = ref
                    notes.append(
                        f"- **{ref}** `{case['key']}` on {NAMES[name]}: {_oneline(st['reason'])}"
                    )
        if not any(m.get(name) for m in case["metrics"] for name in LIBS):
            # Nothing measured on either side: one row saying why, not one per metric.
            workload = case["workload"] if case["workload"] != last else ""
            last = case["workload"]
            cells = []
            for name in LIBS:
                st = case["status"].get(name)
                cells.append(_cell(None, "", st, refs.get((case["key"], name), "")))
            targets = "; ".join(m["target"] for m in case["metrics"] if m["target"])
            met = "– not measured" if targets else ""
            lines.append(
                f"| {workload} | {case['label']} | (all) | {cells[0]} | {cells[1]} | – | "
                f"{targets} | {met} |"
            )
            continue
        label = case["label"]
        if 0 < case.get("reps_done", 0) < report["reps"]:
            label += f" ({case['reps_done']} rep{'s' if case['reps_done'] > 1 else ''} only)"
        for m in case["metrics"]:
            workload = case["workload"] if case["workload"] != last else ""
            last = case["workload"]
            cells = []
            for name in LIBS:
                st = case["status"].get(name)
                cells.append(_cell(m.get(name), m["unit"], st, refs.get((case["key"], name), "")))
            lines.append(
                f"| {workload} | {label} | {m['label']} | {cells[0]} | {cells[1]} | "
                f"{_ratio(m)} | {m['target'] or ''} | {_met(m, case['status'].get('threadline'))} |"
            )
    unavailable = sorted(
        {
            f"{NAMES[n]} on {c['backend']}: {_oneline(st['reason'])}"
            for c in report["cases"]
            for n, st in c["status"].items()
            if st["status"] in ("unavailable", "missing") and st["reason"]
        }
    )
    if notes:
        lines.append("")
        lines.append("Failures (full tracebacks in the JSON report):")
        lines.extend(notes)
    if unavailable:
        lines.append("")
        lines.append("Not measured:")
        lines.extend(f"- {u}" for u in unavailable)
    return "\n".join(lines)


def _load(values: list[float] | None) -> str:
    return "/".join(f"{v:.2f}" for v in values) if values else "?"


def _oneline(text: str | None, limit: int = 240) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------------------ profiling
