from pathlib import Path


def test_largest_file():
    assert Path("largest.txt").read_text().strip().removeprefix("./") == "data/cache/blob-17.bin"
