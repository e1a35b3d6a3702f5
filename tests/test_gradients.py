import numpy as np
import pytest

from pyflink_tensair.core.gradients import (average_gradients, dense_nbytes, merge_sparse, scale_gradients,
                                            sum_gradients)
from pyflink_tensair.core.messages import SparseGradient


def _sparse(indices, value, shape=(6, 2)):
    return SparseGradient(np.array(indices), np.full((len(indices), shape[1]), value, np.float32), shape)


def test_merge_sparse_sums_repeated_rows_and_stays_sparse():
    merged = merge_sparse([_sparse([4, 1], 1.0), _sparse([1, 5], 2.0)])
    assert merged.indices.tolist() == [1, 4, 5]
    assert merged.values[:, 0].tolist() == [3.0, 1.0, 2.0]
    np.testing.assert_array_equal(merged.to_dense(), _sparse([4, 1], 1.0).to_dense() + _sparse([1, 5], 2.0).to_dense())


def test_sum_mixes_dense_and_sparse_terms():
    total = sum_gradients([{"a": _sparse([0], 1.0)}, {"a": np.ones((6, 2), np.float32)}])
    assert isinstance(total["a"], np.ndarray) and total["a"][0, 0] == 2.0 and total["a"][1, 0] == 1.0


def test_average_is_the_mean_and_keeps_dtype():
    avg = average_gradients([{"w": np.array([1.0, 3.0], np.float32)}, {"w": np.array([3.0, 5.0], np.float32)}])
    assert avg["w"].dtype == np.float32 and avg["w"].tolist() == [2.0, 4.0]
    assert scale_gradients({"s": _sparse([2], 4.0)}, 0.5)["s"].values[0, 0] == 2.0


def test_sets_naming_different_variables_are_rejected():
    with pytest.raises(ValueError, match="different variables"):
        sum_gradients([{"a": np.zeros(1)}, {"b": np.zeros(1)}])


def test_dense_size_of_sparse_rows_is_the_whole_table():
    grads = {"e": _sparse([1, 2], 1.0, shape=(1000, 8))}
    assert grads["e"].nbytes == 2 * 8 + 2 * 8 * 4
    assert dense_nbytes(grads) == 1000 * 8 * 4


def test_half_float_rows_are_summed_scaled_and_made_dense_in_float32():
    from pyflink_tensair.core.gradients import average_gradients

    half = SparseGradient(np.array([1]), np.full((1, 2), 1000.0, np.float16), (3, 2))
    full = SparseGradient(np.array([1, 2]), np.full((2, 2), 0.5, np.float32), (3, 2))
    merged = merge_sparse([half, half, full])
    assert merged.values.dtype == np.float32 and merged.values[0, 0] == 2000.5
    assert average_gradients([{"e": half}, {"e": half}])["e"].values.dtype == np.float32
    assert half.to_dense().dtype == np.float32 and half.dense_nbytes == 3 * 2 * 4  # as TensAIR sends it
