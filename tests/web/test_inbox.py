"""The inbox in a real browser: answering reviews (accept, edit, respond, reject) and typed
questions, each resuming its thread through the run API, and a refused answer."""

from __future__ import annotations

import json
import uuid
from typing import Any

from browser import expect
from harness import RunningServer
from webserver import history_of, inbox_of, screenshot, start_thread, thread_of


def open_card(page: Any, served: RunningServer, tid: str) -> Any:
    page.goto(inbox_of(served.url, tid))
    card = page.locator(f'article[data-thread="{tid}"]')
    try:
        expect(card).to_be_visible()
    except AssertionError as missing:  # say where the thread stands, to tell why
        raise AssertionError(f"no card; the thread: {thread_of(served.url, tid)}") from missing
    return card


def decided(served: RunningServer, tid: str) -> dict[str, Any]:
    thread = thread_of(served.url, tid)
    assert thread["status"] == "idle", thread
    answer: dict[str, Any] = thread["values"]["answer"]
    return answer


def test_accept_a_tool_call(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "reviewed", {"order": "B2"})
    card = open_card(page, served, tid)
    expect(card.get_by_text("Refund order B2")).to_be_visible()
    args = card.get_by_role("table")  # the arguments as a table, not JSON
    expect(args.get_by_role("row", name="order B2")).to_be_visible()
    expect(args.get_by_role("row", name="amount 30")).to_be_visible()
    card.get_by_role("button", name="Accept").click()
    card.get_by_role("button", name="Send decision").click()
    expect(card.get_by_text("review finished")).to_be_visible()
    expect(card.get_by_text("The run ended.")).to_be_visible()
    assert decided(served, tid) == {"type": "accept", "args": None, "message": None}
    assert thread_of(served.url, tid)["values"]["log"] == ["decided: accept"]


def test_edit_then_approve(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "reviewed", {"order": "B2"})
    card = open_card(page, served, tid)
    card.get_by_role("button", name="Edit").click()
    amount = card.get_by_label("amount")
    expect(amount).to_have_value("30")
    amount.fill("-4")
    card.get_by_role("button", name="Send decision").click()
    expect(card.get_by_text("Must be at least 0.")).to_be_visible()  # checked before sending
    assert thread_of(served.url, tid)["status"] == "interrupted"
    amount.fill("20")
    card.get_by_role("button", name="Send decision").click()
    expect(card.get_by_text("The run ended.")).to_be_visible()
    answer = decided(served, tid)
    assert answer["type"] == "edit" and answer["args"] == {"order": "B2", "amount": 20}


def test_respond_with_the_keyboard(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "reviewed", {"order": "B2"})
    card = open_card(page, served, tid)
    card.get_by_role("button", name="Respond").focus()
    page.keyboard.press("Enter")
    expect(card.get_by_role("button", name="Respond")).to_have_attribute("aria-pressed", "true")
    response = card.get_by_label("Response")
    expect(response).to_be_focused()
    card.get_by_role("button", name="Send decision").click()
    expect(card.get_by_text("Write the response.")).to_be_visible()
    response.focus()
    page.keyboard.type("Order B2 was already refunded.")
    card.get_by_role("button", name="Send decision").focus()
    page.keyboard.press("Enter")
    expect(card.get_by_text("The run ended.")).to_be_visible()
    answer = decided(served, tid)
    assert answer == {"type": "respond", "args": None, "message": "Order B2 was already refunded."}


def test_reject(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "reviewed", {"order": "B2"})
    card = open_card(page, served, tid)
    card.get_by_role("button", name="Reject").click()
    card.get_by_label("Reason").fill("Outside the return window.")
    card.get_by_role("button", name="Send decision").click()
    expect(card.get_by_text("The run ended.")).to_be_visible()
    answer = decided(served, tid)
    assert answer == {"type": "reject", "args": None, "message": "Outside the return window."}


def test_typed_answer_refused_by_the_server_then_accepted(
    page: Any, served: RunningServer
) -> None:
    tid = start_thread(served.url, "typed", {"order": "A1"}, metadata={"customer": "ada"})
    card = open_card(page, served, tid)
    expect(card.get_by_text("How much should we refund for order A1?")).to_be_visible()
    expect(card.get_by_label("Currency")).to_have_value("0")  # the default, EUR
    expect(card.get_by_label("Currency").locator("option:checked")).to_have_text("EUR")
    expect(card.get_by_label("Notify the customer")).to_be_checked()
    card.get_by_role("button", name="Send answer").click()  # empty: refused before sending
    order_field = card.locator(".field").filter(has=page.get_by_label("Order"))
    expect(order_field.locator(".error")).to_have_text("This field is required.")
    card.get_by_label("Order").fill("a1")  # the pattern is the server's to check
    card.get_by_label("Amount").fill("12")
    card.get_by_label("Reason").fill("Broken on arrival")
    before = history_of(served.url, tid)
    card.get_by_role("button", name="Send answer").click()
    expect(order_field.locator(".error")).to_contain_text("must match the pattern")
    expect(card.get_by_label("Order")).to_have_attribute("aria-invalid", "true")
    expect(card.get_by_text("Nothing was resumed: the answer was refused.")).to_be_visible()
    screenshot(page, "answer-form")
    assert history_of(served.url, tid) == before  # no checkpoint, the question still waits
    assert thread_of(served.url, tid)["interrupts"]
    card.get_by_label("Order").fill("A1")
    card.get_by_role("button", name="Send answer").click()
    expect(card.get_by_text("The run ended.")).to_be_visible()
    assert decided(served, tid) == {
        "order": "A1", "amount": 12, "reason": "Broken on arrival", "currency": "EUR",
        "notify": True,
    }


def plain_refusal(route: Any) -> None:
    """The run's events as the server sent them, but the error's message says nothing a form
    could read: only its ``problems`` name the fields."""
    blocks = route.fetch().text().split("\n\n")
    for i, block in enumerate(blocks):
        if block.startswith("event: error\n"):
            lines = block.split("\n")
            data = json.loads(lines[1].removeprefix("data: "))
            data["message"] = "The answer was refused."
            lines[1] = f"data: {json.dumps(data)}"
            blocks[i] = "\n".join(lines)
    route.fulfill(
        status=200, headers={"content-type": "text/event-stream"}, body="\n\n".join(blocks)
    )


def test_a_refused_answers_problems_go_under_their_fields(
    page: Any, served: RunningServer
) -> None:
    tid = start_thread(served.url, "typed", {"order": "A2"})
    card = open_card(page, served, tid)
    page.route(f"**/threads/{tid}/runs/stream", plain_refusal)
    card.get_by_label("Order").fill("a2")
    card.get_by_label("Amount").fill("5")
    card.get_by_label("Reason").fill("Late delivery")
    card.get_by_role("button", name="Send answer").click()
    expect(card.get_by_text("Error: InvalidAnswerError: The answer was refused.")).to_be_visible()
    order_field = card.locator(".field").filter(has=page.get_by_label("Order"))
    expect(order_field.locator(".error")).to_have_text(
        "must match the pattern '^[A-Z][0-9]+$', got 'a2'"
    )
    expect(card.get_by_label("Order")).to_have_attribute("aria-invalid", "true")
    expect(card.get_by_label("Order")).to_be_focused()
    expect(card.locator(".form-error")).to_be_empty()
    # A metadata filter keeps number-like ids as text (thread ids' prefixes are used as tags).
    parsed = page.evaluate(
        """async () => {
          const { parseMetadata } = await import('/ui/dom.js');
          return parseMetadata('a=12345678, b=8e907397, c=true, d={"x": 1}, e="7"');
        }"""
    )
    assert parsed == {"a": "12345678", "b": "8e907397", "c": True, "d": {"x": 1}, "e": "7"}
    # Without problems (an older server), the message is read; an unknown path goes to the form.
    read = page.evaluate(
        """async () => {
          const { refusedProblems } = await import('/ui/schemaform.js');
          const message = 'the answer to interrupt i1 is invalid: amount: must be at most 500; ' +
            'reason: too short. Nothing was resumed; the interrupt is still pending';
          return [
            refusedProblems({ message }, 'i1'),
            refusedProblems(
              { message: 'x', interrupt_id: 'i1', problems: [['ship to.city', 'required']] }, 'i1'),
            refusedProblems({ message: 'other', interrupt_id: 'i2', problems: [['a', 'b']] }, 'i1'),
          ];
        }"""
    )
    assert read == [
        [["amount", "must be at most 500"], ["reason", "too short"]],
        [["ship to.city", "required"]],
        [["", "other"]],
    ]


def test_inbox_lists_waiting_threads_newest_first_and_filters(
    page: Any, served: RunningServer
) -> None:
    batch = uuid.uuid4().hex[:8]  # this test's threads only (the tests share one server)
    first = start_thread(
        served.url, "typed", {"order": "A1"}, metadata={"batch": batch, "customer": "ada"}
    )
    second = start_thread(
        served.url, "reviewed", {"order": "B2"}, metadata={"batch": batch, "customer": "bo"}
    )
    start_thread(served.url, "steps", {"n": 1}, metadata={"batch": batch})  # ends: not listed
    page.goto(f"{served.url}/")  # a browser at the server's root lands on the page
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
    filter_by = page.get_by_label("Metadata (key=value, …)")
    filter_by.fill(f"batch={batch}")
    page.get_by_role("button", name="Filter").click()
    cards = page.locator("article.card")
    expect(cards).to_have_count(2)
    expect(cards.nth(0)).to_have_attribute("data-thread", second)  # newest first
    expect(cards.nth(1)).to_have_attribute("data-thread", first)
    screenshot(page, "inbox")
    page.get_by_label("Graph").select_option("typed")
    page.get_by_role("button", name="Filter").click()
    expect(cards).to_have_count(1)
    expect(cards.first).to_have_attribute("data-thread", first)
    page.get_by_label("Graph").select_option("")
    filter_by.fill(f"batch={batch}, customer=bo")
    page.get_by_role("button", name="Filter").click()
    expect(cards).to_have_count(1)
    expect(cards.first).to_have_attribute("data-thread", second)


def test_two_questions_at_once_are_answered_one_by_one(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "pair", {})
    card = open_card(page, served, tid)
    forms = card.locator("form.interrupt")
    expect(forms).to_have_count(2)
    legal = forms.filter(has_text="May we ship to this country?")
    stock = forms.filter(has_text="How many are left?")
    expect(stock.get_by_role("row", name="sku X-9")).to_be_visible()  # the rest as a table
    legal.get_by_label("Answer").fill("yes")
    legal.get_by_role("button", name="Send answer").click()
    expect(legal.get_by_text("The run stopped again: it waits for a person.")).to_be_visible()
    assert thread_of(served.url, tid)["values"]["answers"] == ["legal: yes"]
    stock.get_by_label("Answer").fill("12")
    stock.get_by_role("button", name="Send answer").click()
    expect(stock.get_by_text("The run ended.")).to_be_visible()
    assert sorted(thread_of(served.url, tid)["values"]["answers"]) == ["legal: yes", "stock: 12"]


def test_a_review_in_agent_inbox_shape(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "inbox_shaped", {})
    card = open_card(page, served, tid)
    expect(card.get_by_role("row", name="ticket 7")).to_be_visible()
    buttons = card.get_by_role("group", name="Decision for close_ticket").get_by_role("button")
    expect(buttons).to_have_text(["Accept", "Reject"])  # only what the request allows
    card.get_by_role("button", name="Send decision").click()
    expect(card.get_by_text("Choose a decision.")).to_be_visible()
    buttons.first.click()
    card.get_by_role("button", name="Send decision").click()
    expect(card.get_by_text("The run ended.")).to_be_visible()
    assert decided(served, tid)["type"] == "accept"


def test_a_thread_at_a_breakpoint_is_continued(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "steps", {"n": 1}, interrupt_before=["double"])
    card = open_card(page, served, tid)
    expect(card.get_by_text("Stopped at a breakpoint.")).to_be_visible()
    card.get_by_role("button", name="Continue").click()
    expect(card.get_by_text("The run ended.")).to_be_visible()
    assert thread_of(served.url, tid)["values"] == {"n": 4, "label": "finished with 4"}


def test_a_form_from_a_pydantic_model(page: Any, served: RunningServer) -> None:
    tid = start_thread(served.url, "typed_model", {})
    card = open_card(page, served, tid)
    expect(card.get_by_label("Currency").locator("option:checked")).to_have_text("EUR")  # $ref
    expect(card.get_by_label("Note")).not_to_have_attribute("aria-required", "true")  # Optional
    expect(card.get_by_role("group", name="Ship to")).to_be_visible()  # a nested model
    card.get_by_label("Amount").fill("15")
    card.get_by_role("button", name="Send answer").click()
    expect(card.get_by_label("City")).to_have_attribute("aria-invalid", "true")
    card.get_by_label("City").fill("Lyon")
    card.get_by_label("Currency").select_option(label="USD")
    card.get_by_role("button", name="Send answer").click()
    expect(card.get_by_text("The run ended.")).to_be_visible()
    assert decided(served, tid) == {
        "amount": 15, "currency": "USD", "note": None, "ship_to": {"city": "Lyon", "zip": None}
    }
