"""Feedback marks a right answer ✅, a mistake ❌ and an untouched stub ✏️ (the learner's turn)."""

from bertlib.exercises import NOT_ANSWERED, Feedback


def test_right_answer_is_marked_done():
    assert str(Feedback(True, "all six rows sum to 1")) == "✅ all six rows sum to 1"


def test_mistake_is_marked_wrong():
    assert str(Feedback(False, "softmax over the wrong axis")).startswith("❌ ")


def test_untouched_stub_is_marked_as_the_learners_turn_not_as_a_mistake():
    text = str(Feedback(False, f"{NOT_ANSWERED}: replace None with your (6, 6) array"))
    assert text.startswith("✏️ ") and "❌" not in text


def test_feedback_is_truthy_only_when_ok():
    assert Feedback(True, "ok") and not Feedback(False, "no")
