"""The estimate's OTRC rule places the cleared message in the prompt it was cleared in (A.5.2).

On replays of a synthetic mini-swe-agent 1.x corpus (``ctxpolicy.testing.priced_corpus``: every
call with the provider's usage, cached tokens and price), imported and replayed as a user would,
the estimate agrees with the exact prefix simulation within 2 % for OTRC/St and
OTRC+TR/St+Th/0.5 (the code before the fix was 8 % and 6 % above it on this corpus)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctxpolicy.cli import main as ctxpolicy
from ctxpolicy.metrics.cost import estimated_cached
from ctxpolicy.testing.priced_corpus import write_priced_corpus


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    root = tmp_path_factory.mktemp("otrc")
    write_priced_corpus(root / "src", runs=4, steps=30, openrouter_every=2)
    assert (
        ctxpolicy(
            ["import", "-i", str(root / "src"), "--benchmark", "swe", "--model", "m", "--out", str(root / "runs")]
        )
        == 0
    )
    policies = ["FC", "OTRC/St", "OTRC+TR/St+Th/0.5", "TRC/Th"]
    argv = [
        "replay",
        "--runs",
        str(root / "runs" / "swe" / "m" / "imported"),
        "--policies",
        *policies,
        "--threshold",
        "3000",
    ]
    assert ctxpolicy([*argv, "--out", str(root / "replay")]) == 0
    return root


def test_estimate_within_two_percent_of_exact_on_replayed_otrc_policies(replayed, capsys):
    capsys.readouterr()
    assert ctxpolicy(["cost", "--runs", str(replayed / "replay"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_policy = {p["policy"]: p for p in out["configurations"]}
    for policy in ("OTRC/St", "OTRC+TR/St+Th/0.5", "TRC/Th"):
        entry = by_policy[policy]
        assert entry["runs"] == 4
        assert abs(entry["estimated"] / entry["exact"] - 1) < 0.02, policy


def test_the_cleared_message_is_placed_in_its_own_prompt_worked_by_hand():
    # call 3 cleared a message: U = 400 local tokens before it, of a history of A = 1000 local
    # tokens sent (T = 1600 before the clearing, with the newest reply and output), P_3 = 1100
    # server tokens. Own prompt: floor(400 * 1100 / 1000) = 440 -> 432 (16-token blocks); the old
    # rule took the previous prompt's share: floor(400 * 1500 / 1600) = 375 -> 368.
    prompts = np.array([1000, 1500, 1100])
    otrc = np.array([False, False, True])
    u, t, a = np.array([-1, -1, 400]), np.array([-1, -1, 1600]), np.array([900, 1400, 1000])
    cached, rule = estimated_cached(prompts, otrc, unchanged_tokens=u, tokens_before=t, tokens_after=a)
    assert cached.tolist() == [0, 992, 432] and rule.tolist() == ["first", "growth", "otrc"]
    # without est_tokens_after the previous prompt's share is the fallback
    cached, _ = estimated_cached(prompts, otrc, unchanged_tokens=u, tokens_before=t)
    assert cached.tolist() == [0, 992, 368]
    # a drop of 1,200 tokens (a large reduction) is still placed by the event that explains it
    prompts = np.array([1000, 2400, 1200])
    cached, rule = estimated_cached(prompts, otrc, unchanged_tokens=u, tokens_before=t, tokens_after=a)
    assert cached.tolist() == [0, 992, 480] and rule[2] == "otrc"
