import pytest

from tinyweb.urls import NoReverseMatch, Resolver404, Router


def view(**kwargs):
    return kwargs


def make_router():
    router = Router()
    router.add("articles/<int:year>/", view, name="archive")
    router.add("articles/<int:year>/<slug:title>/", view, name="article")
    return router


def test_resolve_converts_ints():
    assert make_router().resolve("articles/2024/") == (view, {"year": 2024})


def test_resolve_slug():
    assert make_router().resolve("articles/2024/hello-world/")[1] == {"year": 2024, "title": "hello-world"}


def test_resolve_404():
    with pytest.raises(Resolver404):
        make_router().resolve("nope/")


def test_reverse():
    assert make_router().reverse("article", year=2024, title="hi") == "/articles/2024/hi/"


def test_reverse_missing_argument():
    with pytest.raises(NoReverseMatch):
        make_router().reverse("article", year=2024)
