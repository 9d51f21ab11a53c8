"""bertlib.checks: each helper accepts good input and names the argument and range on bad input."""

import numpy as np
import pytest

from bertlib import checks


def test_whole_accepts_numpy_ints_and_names_the_range():
    assert checks.whole(np.int64(3), "k", 0, 5) == 3
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0\.\.5 \(6 layers\), got 7"):
        checks.whole(7, "layer", 0, 5, why="(6 layers)")
    with pytest.raises(ValueError, match=r"n must be a whole number >= 1, got 0"):
        checks.whole(0, "n", 1)


@pytest.mark.parametrize("bad", [True, 2.0, "3", None])
def test_whole_rejects_non_integers(bad):
    with pytest.raises(TypeError, match="k must be a whole number"):
        checks.whole(bad, "k")


def test_number_range_open_low_and_non_finite():
    assert checks.number(0.5, "p", 0, 1) == 0.5
    assert checks.number(np.float32(1), "p", 0, 1) == 1.0
    with pytest.raises(ValueError, match=r"p must be a number in \[0, 1\], got 1.5"):
        checks.number(1.5, "p", 0, 1)
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        checks.number(0, "p", 0, 1, open_low=True)
    with pytest.raises(ValueError, match="finite"):
        checks.number(float("nan"), "x")
    with pytest.raises(TypeError):
        checks.number(True, "x")


def test_one_of_lists_the_choices():
    assert checks.one_of("zero", "mode", ("uniform", "zero")) == "zero"
    with pytest.raises(ValueError, match="mode must be one of 'uniform', 'zero'; got 'half'"):
        checks.one_of("half", "mode", ("uniform", "zero"))
    with pytest.raises(ValueError):
        checks.one_of([1], "mode", {"a", "b"})


def test_as_array_types_dims_and_finite():
    out = checks.as_array([[1, 2], [3, 4]], "X", 2)
    assert out.dtype == np.float64 and out.shape == (2, 2)
    f32 = np.ones((2, 3), np.float32)
    assert checks.as_array(f32, "X", 2) is f32
    with pytest.raises(TypeError, match="boolean"):
        checks.as_array(np.ones(3, bool), "X")
    with pytest.raises(TypeError, match="real numbers"):
        checks.as_array(np.ones(3, complex), "X")
    with pytest.raises(TypeError, match="array of numbers"):
        checks.as_array([[1, 2], [3]], "X")
    with pytest.raises(ValueError, match=r"X must have 2 dimensions \(n, d\), got shape \(3,\)"):
        checks.as_array([1, 2, 3], "X", 2, layout="(n, d)")
    with pytest.raises(ValueError, match=r"at least 2 dimensions"):
        checks.as_array([1, 2, 3], "X", min_ndim=2)
    with pytest.raises(ValueError, match=r"1 NaN/inf value\(s\) \(first at index \(1,\)\)"):
        checks.as_array([0.0, np.nan], "X")
    assert np.isnan(checks.as_array([np.nan], "X", finite=False)).all()


def test_same_shape():
    checks.same_shape(np.zeros((2, 3)), (2, 3), ("a", "b"))
    with pytest.raises(ValueError, match=r"a and b must have the same shape, got \(2, 3\) and \(3, 2\)"):
        checks.same_shape(np.zeros((2, 3)), np.zeros((3, 2)), ("a", "b"))


def test_vocab_ids_names_type_shape_and_the_first_id_outside():
    assert checks.vocab_ids(np.array([0, 9]), "ids", 10).tolist() == [0, 9]
    with pytest.raises(TypeError, match="ids must be an array of whole numbers"):
        checks.vocab_ids([1.5], "ids", 10)
    with pytest.raises(ValueError, match=r"a 1-D array of whole numbers \(token ids\), got "
                                         r"shape \(1, 2\)"):
        checks.vocab_ids([[1, 2]], "ids", 10, 1, "a 1-D array")
    with pytest.raises(ValueError, match=r"ids must be in 0\.\.9 \(a vocabulary of 10\), got -1"):
        checks.vocab_ids([3, -1, 12], "ids", 10)
