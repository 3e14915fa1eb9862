"""The thread view and threads list in a real browser: the timeline, a fork from an earlier
checkpoint that shows as a branch, replay, a failed thread's error, search and delete."""

from __future__ import annotations

import json
import uuid
from typing import Any

from browser import expect
from harness import RunningServer
from webserver import history_of, screenshot, start_thread, thread_of


def open_thread(page: Any, served: RunningServer, tid: str) -> None:
    page.goto(f"{served.url}/ui/#/thread/{tid}")
    expect(page.get_by_role("heading", name="Timeline")).to_be_visible()


def test_timeline_shows_each_step_and_its_changes(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "steps", {"n": 1})
    open_thread(page, served, tid)
    steps = page.locator("ol.timeline > li")
    expect(steps).to_have_count(5)  # input, then __start__, start, double, finish
    double = steps.filter(has_text="Step 2")
    expect(double.get_by_role("button")).to_contain_text("double ran")
    expect(double.locator(".diff")).to_have_text("n: 2 → 4")
    expect(page.get_by_role("button", name="Step 3 finish ran · end current")).to_have_attribute(
        "aria-pressed", "true"
    )
    graph = page.locator("svg.graph")
    expect(graph.locator('[data-node="finish"]')).to_have_class("node ran")
    double.get_by_role("button").focus()  # keyboard: Tab to a step, Enter selects it
    page.keyboard.press("Enter")
    expect(double.get_by_role("button")).to_have_attribute("aria-pressed", "true")
    expect(graph.locator('[data-node="double"]')).to_have_class("node ran")
    expect(graph.locator('[data-node="finish"]')).to_have_class("node next")
    expect(page.locator(".detail").get_by_role("row", name="n 4")).to_be_visible()


def test_fork_from_an_earlier_checkpoint_makes_a_branch(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "steps", {"n": 1})
    open_thread(page, served, tid)
    page.locator("ol.timeline > li").filter(has_text="Step 1").get_by_role("button").click()
    page.get_by_role("button", name="Fork from here").click()
    editor = page.get_by_label("State to fork from step 1 (JSON)")
    expect(editor).to_be_focused()
    editor.fill('{"n": 10, ')
    expect(page.locator("#fork-error")).to_contain_text("Not valid")
    editor.fill(json.dumps({"n": 10, "label": "started"}))
    expect(page.locator("#fork-error")).to_be_empty()
    page.get_by_role("button", name="Save fork and run").click()
    expect(page.get_by_text("The run ended.")).to_be_visible()
    branch = page.locator("ol.timeline > li[data-branch='1']")
    expect(branch.first).to_contain_text("Branch 2: a fork from step 1")
    expect(branch.first).to_contain_text("state edited")
    expect(branch.first.locator(".diff")).to_have_text("n: 2 → 10")
    expect(branch.last).to_contain_text("finished with 20")
    screenshot(page, "timeline")
    assert thread_of(served.url, tid)["values"] == {"n": 20, "label": "finished with 20"}
    history = history_of(served.url, tid)
    parents = [s["parent_checkpoint"]["checkpoint_id"] for s in history if s["parent_checkpoint"]]
    assert len(parents) == len(set(parents)) + 1  # one checkpoint has two children: the fork


def test_replay_from_a_checkpoint(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "steps", {"n": 1})
    open_thread(page, served, tid)
    page.locator("ol.timeline > li").filter(has_text="Step 2").get_by_role("button").click()
    page.get_by_role("button", name="Replay from here").click()
    expect(page.get_by_text("finish finished, wrote label.")).to_be_visible()
    branch = page.locator("ol.timeline > li[data-branch='1']")
    expect(branch).to_have_count(2)  # a copy of step 2, then what ran from it
    expect(branch.first).to_contain_text("Branch 2: a fork from step 2")
    expect(branch.first).to_contain_text("copied to run again")
    expect(branch.last).to_contain_text("finish ran")
    assert len(history_of(served.url, tid)) == 7


def test_a_failed_thread_shows_its_error(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "failing", {"n": 1})
    open_thread(page, served, tid)
    expect(page.get_by_role("alert").filter(has_text="This thread failed")).to_have_text(
        "This thread failed: ValueError: the refund service is down"
    )
    expect(page.locator(".task-error")).to_have_text(
        "explode failed: ValueError: the refund service is down"
    )
    page.goto(f"{served.url}/ui/#/threads?status=error")
    row = page.locator(f'tr[data-thread="{tid}"]')
    expect(row.locator(".badge")).to_have_text("error")


def test_threads_search_and_delete(page: Any, served: RunningServer) -> None:
    keep = start_thread(served.url, "steps", {"n": 1}, metadata={"team": "web-delete"})
    gone = start_thread(served.url, "steps", {"n": 2}, metadata={"team": "web-delete"})
    page.goto(f"{served.url}/ui/#/threads")
    page.get_by_label("Metadata (key=value, …)").fill("team=web-delete")
    page.get_by_role("button", name="Search").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(2)
    page.get_by_label("Thread id").fill(gone)
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    delete = rows.get_by_role("button", name=f"Delete thread {gone[:8]}")
    delete.click()
    expect(delete).to_have_text("Confirm delete")
    delete.click()
    expect(rows).to_have_count(0)
    assert thread_of(served.url, gone).get("detail", "").endswith("not found")
    assert thread_of(served.url, keep)["status"] == "idle"


def test_readable_on_a_phone(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "reviewed", {"order": "P9"})
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{served.url}/ui/#/thread/{tid}")
    expect(page.get_by_role("button", name="Accept")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    screenshot(page, "phone-thread")


UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea, button')]
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
    && !(el.tagName === 'BUTTON' && el.textContent.trim()))
  .map((el) => el.outerHTML)"""


def test_every_control_has_a_label(page: Any, served: RunningServer) -> None:
    group = {"group": uuid.uuid4().hex[:8]}
    tid = start_thread(served.url, "reviewed", {"order": "L1"}, metadata=group)
    start_thread(served.url, "typed", {"order": "L2"}, metadata=group)
    page.goto(f"{served.url}/ui/#/inbox?metadata=group%3D{group['group']}")  # both forms
    card = page.locator(f'article[data-thread="{tid}"]')
    card.get_by_role("button", name="Edit").click()
    expect(card.get_by_label("Amount")).to_be_visible()
    assert page.evaluate(UNLABELLED) == []
    open_thread(page, served, tid)
    page.get_by_role("button", name="Fork from here").click()
    assert page.evaluate(UNLABELLED) == []
    page.goto(f"{served.url}/ui/#/threads")
    expect(page.get_by_role("button", name="Search")).to_be_visible()
    assert page.evaluate(UNLABELLED) == []


def test_answering_in_the_thread_view_extends_its_timeline(
    page: Any, served: RunningServer
) -> None:
    tid = start_thread(served.url, "reviewed", {"order": "T1"})
    open_thread(page, served, tid)
    expect(page.locator("ol.timeline")).to_contain_text("Asks: review of refund")
    page.get_by_role("button", name="Reject").click()
    page.get_by_role("button", name="Send decision").click()
    expect(page.get_by_text("The run ended.")).to_be_visible()
    last = page.locator("ol.timeline > li").last
    expect(last).to_contain_text("act ran")
    expect(last.get_by_role("button")).to_have_attribute("aria-pressed", "true")
