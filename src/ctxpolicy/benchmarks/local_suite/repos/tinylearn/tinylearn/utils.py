"""Input validation shared by estimators and metrics."""


def check_array(X):
    """Return X as a list of lists of floats; every row must have the same length."""
    rows = [[float(v) for v in row] for row in X]
    if not rows:
        raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
    width = len(rows[0])
    if any(len(row) != width for row in rows):
        raise ValueError("All rows must have the same number of features.")
    return rows


def check_consistent_length(*arrays):
    """Raise ValueError if the arrays do not all have the same number of samples."""
    lengths = [len(a) for a in arrays]
    if len(set(lengths)) > 1:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: {lengths}")


def column(X, j):
    return [row[j] for row in X]
