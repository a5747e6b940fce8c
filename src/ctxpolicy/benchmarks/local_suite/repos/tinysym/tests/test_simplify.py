from tinysym import Add, Mul, Num, Sym, parse, simplify

x = Sym("x")


def test_fold_constants():
    assert simplify(parse("2*3 + 4")) == Num(10)


def test_add_zero():
    assert simplify(Add(x, Num(0))) == x


def test_mul_one():
    assert simplify(Mul(Num(1), x)) == x


def test_nested():
    assert simplify(parse("(x + 0)*1 + 2*2")) == Add(x, Num(4))
