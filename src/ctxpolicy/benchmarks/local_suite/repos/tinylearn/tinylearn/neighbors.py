"""k-nearest-neighbours classification."""

import math
from collections import Counter

from tinylearn.utils import check_array


def euclidean(a, b):
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))


class KNeighborsClassifier:
    def __init__(self, n_neighbors=3):
        self.n_neighbors = n_neighbors

    def fit(self, X, y):
        self.X_ = check_array(X)
        self.y_ = list(y)
        return self

    def _vote(self, row):
        nearest = sorted(range(len(self.X_)), key=lambda i: euclidean(row, self.X_[i]))
        labels = [self.y_[i] for i in nearest[: self.n_neighbors]]
        return Counter(labels).most_common(1)[0][0]

    def predict(self, X):
        return [self._vote(row) for row in check_array(X)]
