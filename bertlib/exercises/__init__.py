"""Checkers for the notebooks' "Try it" exercises: one module per notebook (``nb01``, ...).

Every checker returns a :class:`Feedback` (printed as a short message) that says *what* is wrong
(a wrong shape, a forgotten scaling, softmax over the wrong axis) rather than just "incorrect",
and never raises on a learner's mistake.
"""

from __future__ import annotations

from dataclasses import dataclass

#: How every checker's message for an untouched stub begins; it is marked ✏️ (your turn), not ❌.
NOT_ANSWERED = "not answered yet"


@dataclass(frozen=True)
class Feedback:
    """Result of an exercise check: ``ok`` and a message for the learner."""

    ok: bool
    message: str

    def __str__(self) -> str:
        if self.ok:
            return "✅ " + self.message
        return ("✏️ " if self.message.startswith(NOT_ANSWERED) else "❌ ") + self.message

    def _repr_pretty_(self, p, cycle) -> None:  # IPython shows the message, not the dataclass
        p.text(str(self))

    def __bool__(self) -> bool:
        return self.ok
