from tinyweb.http import QueryDict, reason_phrase


def test_querydict_last_value_wins():
    q = QueryDict("a=1&b=2&a=3")
    assert q["a"] == "3"
    assert q.getlist("a") == ["1", "3"]


def test_querydict_unquotes():
    assert QueryDict("name=J%C3%BCrgen+M")["name"] == "Jürgen M"


def test_reason_phrase():
    assert reason_phrase(404) == "Not Found"
    assert reason_phrase(799) == "Unknown Status Code"
