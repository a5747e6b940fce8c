from pathlib import Path


def conf():
    return Path("service.conf").read_text()


def test_no_placeholders_left():
    assert "{{" not in conf()


def test_name():
    assert "name = ledger-api" in conf()
    assert "log_prefix = ledger-api-" in conf()


def test_port_is_the_required_one():
    assert "listen = 0.0.0.0:8421" in conf()


def test_workers():
    assert "workers = 4" in conf()
