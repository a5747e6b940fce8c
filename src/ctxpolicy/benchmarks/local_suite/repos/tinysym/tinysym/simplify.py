"""Bottom-up simplification: constant folding and the identities x+0, x*1."""

from tinysym.expr import Add, Mul, Num, Pow


def simplify(expr):
    if isinstance(expr, Add):
        left, right = simplify(expr.left), simplify(expr.right)
        if isinstance(left, Num) and isinstance(right, Num):
            return Num(left.value + right.value)
        if left == Num(0):
            return right
        if right == Num(0):
            return left
        return Add(left, right)
    if isinstance(expr, Mul):
        left, right = simplify(expr.left), simplify(expr.right)
        if isinstance(left, Num) and isinstance(right, Num):
            return Num(left.value * right.value)
        if left == Num(1):
            return right
        if right == Num(1):
            return left
        return Mul(left, right)
    if isinstance(expr, Pow):
        base, exponent = simplify(expr.base), simplify(expr.exponent)
        if isinstance(base, Num) and isinstance(exponent, Num):
            return Num(base.value ** exponent.value)
        if exponent == Num(1):
            return base
        return Pow(base, exponent)
    return expr
