from tinylearn.metrics import accuracy_score, precision_score, recall_score


def test_accuracy():
    assert accuracy_score([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5


def test_precision_recall():
    y_true, y_pred = [1, 1, 0, 0], [1, 0, 1, 0]
    assert precision_score(y_true, y_pred) == 0.5
    assert recall_score(y_true, y_pred) == 0.5


def test_precision_no_positive_predictions():
    assert precision_score([1, 1], [0, 0]) == 0.0
