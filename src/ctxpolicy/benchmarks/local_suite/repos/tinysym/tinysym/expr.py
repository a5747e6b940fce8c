"""Expression trees: numbers, symbols, sums, products and powers."""


class Expr:
    def __add__(self, other):
        return Add(self, as_expr(other))

    def __mul__(self, other):
        return Mul(self, as_expr(other))

    def __pow__(self, other):
        return Pow(self, as_expr(other))

    def __eq__(self, other):
        return type(self) is type(other) and self.args == other.args

    def __hash__(self):
        return hash((type(self).__name__, self.args))

    def __repr__(self):
        return f"{type(self).__name__}{self.args!r}"


def as_expr(value):
    return value if isinstance(value, Expr) else Num(value)


class Num(Expr):
    def __init__(self, value):
        self.value = value
        self.args = (value,)

    def __str__(self):
        return str(self.value)

    def evaluate(self, env):
        return self.value

    def diff(self, var):
        return Num(0)


class Sym(Expr):
    def __init__(self, name):
        self.name = name
        self.args = (name,)

    def __str__(self):
        return self.name

    def evaluate(self, env):
        if self.name not in env:
            raise KeyError(f"no value for symbol {self.name!r}")
        return env[self.name]

    def diff(self, var):
        return Num(1 if self.name == var else 0)


class Add(Expr):
    def __init__(self, left, right):
        self.left, self.right = left, right
        self.args = (left, right)

    def __str__(self):
        return f"{self.left} + {self.right}"

    def evaluate(self, env):
        return self.left.evaluate(env) + self.right.evaluate(env)

    def diff(self, var):
        return Add(self.left.diff(var), self.right.diff(var))


class Mul(Expr):
    def __init__(self, left, right):
        self.left, self.right = left, right
        self.args = (left, right)

    def __str__(self):
        return f"{wrap(self.left, Add)}*{wrap(self.right, Add)}"

    def evaluate(self, env):
        return self.left.evaluate(env) * self.right.evaluate(env)

    def diff(self, var):
        return Add(Mul(self.left.diff(var), self.right), Mul(self.left, self.right.diff(var)))


class Pow(Expr):
    """base ** exponent; derivatives assume a constant (Num) exponent."""

    def __init__(self, base, exponent):
        self.base, self.exponent = base, exponent
        self.args = (base, exponent)

    def __str__(self):
        return f"{wrap(self.base, (Add, Mul, Pow))}^{wrap(self.exponent, (Add, Mul, Pow))}"

    def evaluate(self, env):
        return self.base.evaluate(env) ** self.exponent.evaluate(env)

    def diff(self, var):
        if not isinstance(self.exponent, Num):
            raise NotImplementedError("only constant exponents are supported")
        n = self.exponent.value
        return Mul(Mul(Num(n), Pow(self.base, Num(n))), self.base.diff(var))


def wrap(expr, kinds):
    return f"({expr})" if isinstance(expr, kinds) else str(expr)
