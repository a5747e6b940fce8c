"""``ctxpolicy import``: public agent trajectories (mini-swe-agent, SWE-agent, OpenAI chat logs)
as FC run directories of the ``imported`` track (docs/import.md)."""
