import json
from pathlib import Path


def report():
    return json.loads(Path("report.json").read_text())


def test_count():
    assert report()["count"] == 8


def test_average_age():
    assert report()["average_age"] == 37.5


def test_by_country():
    assert report()["by_country"] == {"UK": 2, "US": 4, "FI": 1, "NL": 1}
