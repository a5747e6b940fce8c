import pytest

from tinylearn.preprocessing import MinMaxScaler, StandardScaler


def test_standard_scaler():
    out = StandardScaler().fit_transform([[1.0], [3.0]])
    assert out == [[-1.0], [1.0]]


def test_standard_scaler_constant_feature():
    assert StandardScaler().fit_transform([[2.0], [2.0]]) == [[0.0], [0.0]]


def test_minmax_scaler():
    assert MinMaxScaler().fit_transform([[0, 10], [5, 20], [10, 30]]) == [[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]]


def test_ragged_input_rejected():
    with pytest.raises(ValueError):
        StandardScaler().fit([[1, 2], [3]])
