"""Feature scaling."""

import math

from tinylearn.utils import check_array, column


class StandardScaler:
    """Centre each feature to mean 0 and scale it to unit (population) variance."""

    def fit(self, X):
        X = check_array(X)
        n = len(X)
        self.mean_ = [sum(column(X, j)) / n for j in range(len(X[0]))]
        self.scale_ = []
        for j, mean in enumerate(self.mean_):
            var = sum((v - mean) ** 2 for v in column(X, j)) / n
            self.scale_.append(math.sqrt(var) or 1.0)
        return self

    def transform(self, X):
        X = check_array(X)
        return [[(v - m) / s for v, m, s in zip(row, self.mean_, self.scale_)] for row in X]

    def fit_transform(self, X):
        return self.fit(X).transform(X)


class MinMaxScaler:
    """Scale each feature to the range [0, 1]."""

    def fit(self, X):
        X = check_array(X)
        self.min_ = [min(column(X, j)) for j in range(len(X[0]))]
        self.max_ = [max(column(X, j)) for j in range(len(X[0]))]
        return self

    def transform(self, X):
        X = check_array(X)
        return [[(v - lo) / (hi - lo) for v, lo, hi in zip(row, self.min_, self.max_)] for row in X]

    def fit_transform(self, X):
        return self.fit(X).transform(X)
