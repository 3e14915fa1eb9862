"""The trace panel of the thread view in a real browser: a node retried by its RetryPolicy (the
failed attempt with its error, then the one that worked), the events it recorded, a question
asked and then answered from the page; selecting a step highlights its entries."""

from __future__ import annotations

from typing import Any

from browser import expect
from harness import RunningServer
from webserver import SCREENSHOTS, start_thread


def entry_id(row: Any) -> str:
    found: str = row.get_attribute("data-entry")
    return found


def test_the_trace_shows_retries_events_and_a_question_answered(
    page: Any, served: RunningServer
) -> None:
    tid = start_thread(served.url, "traced", {"order": "S1"})
    page.goto(f"{served.url}/ui/#/thread/{tid}")
    panel = page.get_by_role("region", name="Trace", exact=True)
    expect(panel.get_by_role("heading", name="Trace")).to_be_visible()
    lookup = panel.locator("tr.kind-node").filter(has_text="lookup")  # attempts
    expect(lookup).to_have_count(2)
    expect(lookup.first.locator("td").nth(4)).to_have_text("1")  # attempt
    expect(lookup.first).to_contain_text("error")
    expect(panel.locator("tr.detail-node .error")).to_have_text(  # under the failed attempt
        "ConnectionError: the carrier's API timed out"
    )
    expect(
        panel.locator(f'tr.trace-detail[data-entry="{entry_id(lookup.first)}"]')
    ).to_contain_text("the carrier's API timed out")
    expect(lookup.last.locator("td").nth(4)).to_have_text("2")
    expect(lookup.last.locator(".badge")).to_have_text("ok")
    expect(panel.locator("tr.kind-event")).to_have_count(2)
    events = panel.locator("tr.detail-event")
    expect(events.first).to_have_text('by lookup: {"order":"S1","attempt":1}')
    expect(events.last).to_have_text('by lookup: {"order":"S1","attempt":2}')
    asked = panel.locator("tr.detail-interrupt")
    expect(asked).to_contain_text("Asked: Ship order S1 today?")
    expect(asked).to_contain_text("No answer yet.")
    # The thread waits at step 1's checkpoint (selected): lookup made it, confirm ran from it.
    expect(panel.locator("tbody.made")).to_have_attribute("data-step", "1")
    expect(panel.locator("tbody.made")).to_contain_text("made the selected checkpoint")
    expect(panel.locator("tbody.from")).to_have_attribute("data-step", "2")
    expect(panel.locator("tbody.from tr.kind-node")).to_contain_text("interrupted")

    form = page.locator("form.interrupt")
    form.get_by_label("Answer").fill("yes, by courier")
    form.get_by_role("button", name="Send answer").click()
    expect(page.get_by_text("The run ended.")).to_be_visible()
    expect(asked).to_contain_text("Answered: yes, by courier")
    answer = panel.locator("tr.detail-resume")
    expect(answer).to_contain_text("Answer: yes, by courier")
    expect(answer).to_contain_text("to “Ship order S1 today?”")
    made = panel.locator("tbody.made")  # the head, made by confirm, is selected
    expect(made).to_have_attribute("data-step", "2")
    expect(made.locator("tr.kind-node")).to_have_count(2)  # interrupted, then answered: ok

    # Keyboard: select step 1 in the timeline; its entries are the highlighted ones.
    step1 = page.locator("ol.timeline > li").filter(has_text="Step 1").get_by_role("button")
    step1.focus()
    page.keyboard.press("Enter")
    expect(panel.locator("tbody.made")).to_have_attribute("data-step", "1")
    expect(panel.locator("tbody.made tr.kind-node")).to_have_count(2)
    SCREENSHOTS.mkdir(exist_ok=True)  # the timeline and the trace beside it (docs/img/trace.png)
    page.locator(".thread-layout").screenshot(path=str(SCREENSHOTS / "trace.png"))
    only = panel.get_by_label("Only the steps of the selected checkpoint")
    only.focus()
    page.keyboard.press("Space")
    expect(only).to_be_checked()
    expect(panel.locator("tbody.trace-step:visible")).to_have_count(2)  # made it, ran from it
    expect(panel.locator("#trace-summary")).to_contain_text("the steps of the selected checkpoint")
    page.locator("ol.timeline > li").filter(has_text="Step -1").get_by_role("button").click()
    expect(panel.locator("tbody.trace-step:visible")).to_have_count(0)
    expect(panel.locator("#trace-summary")).to_contain_text("No entries for the selected")
    only.uncheck()
    # A step of the trace selects its checkpoint in the timeline.
    panel.locator("tbody[data-step='2']").get_by_role("button", name="Step 2 from").click()
    expect(page.locator("ol.timeline > li").last.get_by_role("button")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(page.get_by_role("heading", name="Step 2")).to_be_visible()


def test_a_failed_threads_trace_shows_the_error(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "failing", {"n": 1})
    page.goto(f"{served.url}/ui/#/thread/{tid}")
    panel = page.get_by_role("region", name="Trace", exact=True)
    failed = panel.locator("tbody.from")  # the head is selected; explode ran from it
    expect(failed.locator("tr.kind-node")).to_contain_text("explode")
    expect(failed.locator("tr.kind-node .badge")).to_have_text("error")
    expect(failed.locator("tr.detail-node .error")).to_have_text(
        "ValueError: the refund service is down"
    )
