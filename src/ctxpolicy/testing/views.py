"""Runs for the trajectory pages' tests and benchmark (``ctxpolicy view``, docs/view.md).

``write_event_runs``: one synthetic FC run and its replays through a policy of every kind of
compression event (TR, TRC, OTRC, SU-p, a stacked OTRC+TR, and SU whose summarizer fails, so it
falls back to TR). ``write_hostile_run``: an FC run whose agent output holds ``</script>``, HTML,
control characters and one huge observation. ``write_large_run``: a long run with large prompts.
The replays go through ``ctxpolicy.replay``, so their events and placeholders are the policies' own.
"""

from __future__ import annotations

from pathlib import Path

from ctxpolicy.policies import parse_spec
from ctxpolicy.policies.summarizer import DeterministicSummarizer
from ctxpolicy.replay import read_source_run, replay_source
from ctxpolicy.replay.output import write_replay
from ctxpolicy.testing.transcripts import transcript, write_fc_history, write_fc_run

TASK = "task-0000"
# name -> (policy, summarizer: None, "ok" or "fail"; threshold as a share of the FC run's last prompt)
EVENT_POLICIES = {
    "TR": ("TR/Th/0.5", None, 0.5),
    "TRC": ("TRC/Th", None, 0.5),
    "OTRC": ("OTRC/St", None, 0.5),
    "SU-p": ("SU-p/Th/0.5", "ok", 0.5),
    "stacked": ("OTRC+TR/St+Th/0.5", None, 0.3),  # low enough for TR to fire after OTRC's clearing
    "fallback": ("SU/Th/0.5", "fail", 0.5),
}
HOSTILE = '</script><script>document.title="pwned"</script><img src=x onerror="document.title=1"><b>bold</b>'


def write_replays(fc_run: Path, out: Path, policies: dict[str, tuple[str, str | None, float]]) -> dict:
    """Replay one FC run through each policy; returns name -> run directory."""
    source = read_source_run(fc_run)
    last = source.agent_calls[-1]["prompt_tokens"]
    runs = {}
    for name, (policy, summarizer, share) in policies.items():
        stand_in = None if summarizer is None else DeterministicSummarizer(fail=summarizer == "fail")
        threshold = int(last * share)
        replayed = replay_source(source, parse_spec(policy), threshold=threshold, summarizer=stand_in)
        runs[name] = write_replay(
            replayed, Path(out), setting="fixed", summarizer=None, real_summaries=stand_in is not None, durable=False
        )
    return runs


def write_event_runs(root: Path, *, steps: int = 24, seed: int = 7) -> dict[str, Path]:
    """``root/fc/…`` (the FC run) and ``root/replay/…`` (one replay per ``EVENT_POLICIES``)."""
    root = Path(root)
    fc = write_fc_run(root / "fc" / "FC" / f"{TASK}__a1", seed=seed, task_id=TASK, steps=steps)
    runs = {"FC": fc}
    runs.update(write_replays(fc, root / "replay", EVENT_POLICIES))
    return runs


def write_hostile_run(run_dir: Path, *, huge_chars: int = 120_000) -> Path:
    """An FC run of a few steps whose commands and outputs are hostile, one of them huge."""
    history = transcript(1, TASK, 4)
    history[2]["content"] = f"THOUGHT: {HOSTILE}\n\n```mswea_bash_command\necho '{HOSTILE}'\n```"
    history[3]["content"] = f"<returncode>0</returncode>\n<output>\n{HOSTILE}\n\x00\x07\x1b[31mred\x1b[0m\n</output>"
    history[5]["content"] = (
        "<returncode>1</returncode>\n<output>\n" + ("x" * 99 + "\n") * (huge_chars // 100) + "</output>"
    )
    history[6]["content"] = (
        "THOUGHT: <script>alert(1)</script>\n\n```mswea_bash_command\ncat <<'EOF'\n</script>\nEOF\n```"
    )
    return write_fc_history(run_dir, history, seed=1, task_id=TASK)


def write_large_run(root: Path, *, steps: int = 250, prompt_tokens: int = 100_000, seed: int = 11) -> dict[str, Path]:
    """A ``steps``-step FC run whose prompts reach about ``prompt_tokens`` (a large task, then
    rounds), and its replay through OTRC+TR at half the final prompt."""
    root = Path(root)
    history = transcript(seed, TASK, steps)
    rounds = sum(len(m["content"]) for m in history[2:]) // 4  # about 4 characters a token
    filler = max(0, prompt_tokens - rounds - 1000)
    history[1]["content"] += "\n" + "\n".join(
        f"spec line {i}: the handler must parse the value" for i in range(filler // 11)
    )
    fc = write_fc_history(root / "fc" / "FC" / f"{TASK}__a1", history, seed=seed, task_id=TASK)
    runs = {"FC": fc}
    runs.update(write_replays(fc, root / "replay", {"stacked": ("OTRC+TR/St+Th/0.5", None, 0.9)}))
    return runs


def repeated_history(task_id: str = TASK, steps: int = 8, repeats: tuple[int, ...] = (2, 3, 4, 5)) -> list[dict]:
    """A history whose agent gives step 1's reply again, word for word, at the ``repeats``
    steps, and gets the same observation back (the message store holds each of them once)."""
    history = transcript(5, task_id, steps)
    for step in repeats:
        history[2 * step] = history[2]
        history[2 * step + 1] = history[3]
    return history


def write_repeated_runs(root: Path, *, steps: int = 8) -> dict[str, Path]:
    """``root/fc/…``: an FC run of ``repeated_history`` (written with each distinct message once),
    and its TR and TRC replays (``root/replay/…``)."""
    fc = write_fc_history(Path(root) / "fc" / "FC" / f"{TASK}__a1", repeated_history(steps=steps), seed=5, task_id=TASK)
    runs = {"FC": fc}
    runs.update(
        write_replays(fc, Path(root) / "replay", {"TR": ("TR/Th/0.5", None, 0.5), "TRC": ("TRC/Th", None, 0.5)})
    )
    return runs
