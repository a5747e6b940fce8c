import pytest

from tinysym import Add, Mul, Num, Pow, Sym, parse
from tinysym.parse import ParseError

x = Sym("x")


def test_parse_precedence():
    assert parse("1 + 2*x") == Add(Num(1), Mul(Num(2), x))


def test_parse_parentheses():
    assert parse("(1 + x)*2") == Mul(Add(Num(1), x), Num(2))


def test_parse_power():
    assert parse("x^2") == Pow(x, Num(2))


def test_parse_float():
    assert parse("2.5") == Num(2.5)


def test_parse_error():
    with pytest.raises(ParseError):
        parse("1 + ")
