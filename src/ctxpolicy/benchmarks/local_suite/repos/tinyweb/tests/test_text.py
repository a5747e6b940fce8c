from tinyweb.text import capfirst, slugify, truncate_words


def test_slugify_strips_punctuation():
    assert slugify("hello, world!") == "hello-world"


def test_slugify_collapses_dashes():
    assert slugify("a -- b") == "a-b"


def test_truncate_words_short_text_unchanged():
    assert truncate_words("one two", 5) == "one two"


def test_capfirst():
    assert capfirst("django") == "Django"
    assert capfirst("") == ""
