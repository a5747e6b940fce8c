import subprocess
from pathlib import Path


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()


def release_commit():
    for line in git("log", "--format=%H %s").splitlines():
        sha, subject = line.split(" ", 1)
        if subject == "Release candidate":
            return sha
    raise AssertionError("history was rewritten: no 'Release candidate' commit")


def test_tag_points_at_release_candidate():
    assert git("rev-parse", "v1.0^{commit}") == release_commit()


def test_release_commit_file():
    assert Path("release_commit.txt").read_text().strip() == release_commit()
