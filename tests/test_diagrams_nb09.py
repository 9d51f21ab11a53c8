"""The notebook 09 picture: one pre-training step."""

import matplotlib
import pytest

from bertlib.pictures.diagrams import pretraining_step_picture

matplotlib.use("Agg")


def test_pretraining_step_draws_every_stage_with_its_shape():
    fig = pretraining_step_picture(batch=8, n=5, vocab=30)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for label in ("grammar", "ids (8, 5)", "80 / 10 / 10", "logits (8, 5, 30)", "cross-entropy",
                  "AdamW"):
        assert label in texts


def test_pretraining_step_names_a_bad_size():
    with pytest.raises(ValueError, match="batch must be a whole number >= 1, got 0"):
        pretraining_step_picture(batch=0)


def test_the_old_picture_name_is_the_same_function_until_notebook_03_moves():
    from bertlib.pictures import diagrams

    assert not hasattr(diagrams, "pretraining_step")  # notebook 09 uses the new name
    assert diagrams.embeddings_and_stack is diagrams.embeddings_and_stack_picture
