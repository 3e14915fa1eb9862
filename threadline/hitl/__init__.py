"""Human in the loop: typed interrupts, action review and tools that ask before they run.

- ``interrupt(value, schema=...)`` (in ``threadline``) states what the answer must look like;
  an answer that does not fit is refused at resume with nothing run.
- ``request_review([ActionRequest(...), ...])`` asks for one ``Decision`` per action
  (accept, edit, respond, reject) in one interrupt, in the shape LangChain's
  human-in-the-loop middleware and Agent Inbox use.
- ``human_review(tool)`` wraps a function or langchain-core tool so each call is reviewed first.

See ``docs/human-in-the-loop.md``.
"""

from threadline.hitl.review import (
    ActionRequest,
    Decision,
    DecisionType,
    request_review,
    review_answer_schema,
    review_request,
)
from threadline.hitl.tools import human_review

__all__ = [
    "ActionRequest",
    "Decision",
    "DecisionType",
    "human_review",
    "request_review",
    "review_answer_schema",
    "review_request",
]
