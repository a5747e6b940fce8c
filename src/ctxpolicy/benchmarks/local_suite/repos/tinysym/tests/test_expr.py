from tinysym import Add, Mul, Num, Pow, Sym

x = Sym("x")


def test_str():
    assert str(Add(Mul(Num(3), x), Num(1))) == "3*x + 1"
    assert str(Mul(Add(x, Num(1)), x)) == "(x + 1)*x"


def test_evaluate():
    assert Add(Mul(Num(3), x), Num(1)).evaluate({"x": 2}) == 7


def test_operators_build_trees():
    assert x * 2 + 1 == Add(Mul(x, Num(2)), Num(1))


def test_diff_product_rule():
    expr = Mul(x, x)
    assert expr.diff("x").evaluate({"x": 3}) == 6


def test_diff_of_other_symbol_is_zero():
    assert Sym("y").diff("x") == Num(0)


def test_pow_str():
    assert str(Pow(Add(x, Num(1)), Num(2))) == "(x + 1)^2"
