"""The notebook 09 picture: one pre-training step."""

import matplotlib
import pytest

from bertlib.pictures.diagrams import pretraining_step_picture

matplotlib.use("Agg")


def test_pretraining_step_draws_every_stage_with_its_shape():
    fig = pretraining_step_picture(batch=8, n=5, vocab=30)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for label in ("grammar", "ids (8, 5)", "80 / 10 / 10", "logits (8, 5, 30)", "cross-entropy",
                  "AdamW", "new params"):
        assert label in texts
    assert "weights" not in texts  # the learned numbers are params; weights are attention's


def test_pretraining_step_names_a_bad_size():
    with pytest.raises(ValueError, match="batch must be a whole number >= 1, got 0"):
        pretraining_step_picture(batch=0)


def test_the_old_picture_names_are_gone():
    from bertlib.pictures import diagrams

    # notebooks 03 and 09 use the picture names; the old ones read like the computations
    assert not hasattr(diagrams, "pretraining_step")
    assert not hasattr(diagrams, "embeddings_and_stack")
