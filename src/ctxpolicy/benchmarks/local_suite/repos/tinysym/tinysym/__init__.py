"""tinysym: tiny symbolic algebra (expressions, parsing, derivatives, simplification)."""

from tinysym.expr import Add, Mul, Num, Pow, Sym
from tinysym.parse import parse
from tinysym.simplify import simplify

__all__ = ["Add", "Mul", "Num", "Pow", "Sym", "parse", "simplify"]
