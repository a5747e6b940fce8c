"""Classification and regression metrics."""

import math


def accuracy_score(y_true, y_pred):
    """Fraction of predictions equal to the truth."""
    return sum(t == p for t, p in zip(y_true, y_pred)) / len(y_true)


def mean_squared_error(y_true, y_pred):
    """Mean of the squared differences."""
    errors = [(t - p) ** 2 for t, p in zip(y_true, y_pred)]
    return math.sqrt(sum(errors) / len(errors))


def precision_score(y_true, y_pred, positive=1):
    predicted = [t for t, p in zip(y_true, y_pred) if p == positive]
    if not predicted:
        return 0.0
    return sum(t == positive for t in predicted) / len(predicted)


def recall_score(y_true, y_pred, positive=1):
    actual = [p for t, p in zip(y_true, y_pred) if t == positive]
    if not actual:
        return 0.0
    return sum(p == positive for p in actual) / len(actual)
