from pathlib import Path


def test_west_total():
    assert Path("west_total.txt").read_text().strip() == "620.00"
