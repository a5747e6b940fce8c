"""A recursive-descent parser for expressions such as '3*x^2 + 2*(y + 1)'."""

import re

from tinysym.expr import Add, Mul, Num, Pow, Sym

TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\d+)|([A-Za-z_]\w*)|(.))")


class ParseError(ValueError):
    pass


def tokenize(text):
    tokens = []
    for number, name, op in TOKEN.findall(text):
        if number:
            tokens.append(("num", float(number) if "." in number else int(number)))
        elif name:
            tokens.append(("sym", name))
        elif op.strip():
            tokens.append(("op", op))
    return tokens


class Parser:
    def __init__(self, text):
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ("end", None)

    def take(self, op=None):
        token = self.peek()
        if op is not None and token != ("op", op):
            raise ParseError(f"expected {op!r}, found {token[1]!r}")
        self.pos += 1
        return token

    def parse(self):
        expr = self.sum()
        if self.peek()[0] != "end":
            raise ParseError(f"unexpected {self.peek()[1]!r}")
        return expr

    def sum(self):
        expr = self.product()
        while self.peek() == ("op", "+"):
            self.take()
            expr = Add(expr, self.product())
        return expr

    def product(self):
        expr = self.power()
        while self.peek() == ("op", "*"):
            self.take()
            expr = Mul(expr, self.power())
        return expr

    def power(self):
        expr = self.atom()
        while self.peek() == ("op", "^"):
            self.take()
            expr = Pow(expr, self.atom())
        return expr

    def atom(self):
        kind, value = self.take()
        if kind == "num":
            return Num(value)
        if kind == "sym":
            return Sym(value)
        if (kind, value) == ("op", "("):
            expr = self.sum()
            self.take(")")
            return expr
        raise ParseError(f"unexpected {value!r}")


def parse(text):
    return Parser(text).parse()
