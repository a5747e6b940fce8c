"""Atomic writes: the target holds the old content or the complete new one, never a part."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ctxpolicy.atomic import atomic_output, atomic_write_bytes, atomic_write_json, atomic_write_text


def test_an_error_mid_write_leaves_the_old_content_and_no_temporary_file(tmp_path):
    target = tmp_path / "out.bin"
    atomic_write_bytes(target, b"old")
    with pytest.raises(RuntimeError, match="crashed"):
        with atomic_output(target) as handle:
            handle.write(b"half of the n")
            handle.flush()
            raise RuntimeError("crashed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_failed_rename_leaves_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"

    def full_disk(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new")
    assert list(tmp_path.iterdir()) == []


def test_the_target_is_absent_until_the_block_ends(tmp_path):
    target = tmp_path / "out.txt"
    with atomic_output(target, "w", durable=False) as handle:
        handle.write("héllo\n")
        assert not target.exists()
    assert target.read_bytes() == "héllo\n".encode("utf-8")


def test_parents_are_created_and_the_file_gets_open_s_permissions(tmp_path):
    target = tmp_path / "a" / "b" / "out.txt"
    assert atomic_write_text(target, "x") == target
    assert target.read_text() == "x"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask


def test_json_formatting_is_the_caller_s_with_a_final_newline(tmp_path):
    data = {"b": "ü", "a": [1, 2]}
    target = tmp_path / "out.json"
    atomic_write_json(target, data, indent=2, sort_keys=True, ensure_ascii=False)
    assert target.read_bytes() == (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    atomic_write_json(target, data)
    assert target.read_text() == '{"b": "\\u00fc", "a": [1, 2]}\n'


def test_text_is_written_byte_for_byte(tmp_path):
    target = tmp_path / "out.txt"
    atomic_write_text(target, "a\r\nb\n")
    assert target.read_bytes() == b"a\r\nb\n"


def test_an_unknown_mode_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="mode 'a'"):
        with atomic_output(tmp_path / "out.txt", "a"):
            pass
    assert list(tmp_path.iterdir()) == []
