from pathlib import Path


def test_logs_moved():
    assert sorted(p.name for p in Path("logs").glob("*.log")) == ["scheduler.log", "server.log", "worker.log"]
    assert not list(Path(".").glob("*.log"))


def test_index():
    assert Path("logs/index.txt").read_text().split() == ["scheduler.log", "server.log", "worker.log"]


def test_tmp_removed_and_notes_kept():
    assert not list(Path(".").glob("*.tmp"))
    assert Path("notes.txt").read_text().strip() == "keep me"


def test_session_code():
    assert Path("session.txt").read_text().strip() == "K7-2291-QX"
