from tinylearn.neighbors import KNeighborsClassifier, euclidean


def test_euclidean():
    assert euclidean([0, 0], [3, 4]) == 5.0


def test_knn_predicts_majority():
    X = [[0], [1], [2], [10], [11], [12]]
    y = ["a", "a", "a", "b", "b", "b"]
    clf = KNeighborsClassifier(n_neighbors=3).fit(X, y)
    assert clf.predict([[1.5], [10.5]]) == ["a", "b"]
