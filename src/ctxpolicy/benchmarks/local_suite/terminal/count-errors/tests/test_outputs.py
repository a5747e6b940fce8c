from pathlib import Path


def test_error_count_file_exists():
    assert Path("error_count.txt").is_file()


def test_error_count_value():
    assert Path("error_count.txt").read_text().strip() == "5"
