"""Write the pins of a lock file into a conda environment file's pip list (scripts/lock.sh).

The pins go between two marker comments in the file's ``pip:`` list; everything else in the
file is left as it is. Usage: python scripts/conda_pins.py LOCK ENV_YAML
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ctxpolicy.provenance.lockfile import LockError, read_pins  # noqa: E402

BEGIN = "# pins of requirements.lock, written by scripts/lock.sh (do not edit)"
END = "# end of the pins of requirements.lock"


def with_pins(text: str, pins: dict[str, str], source: str = "environment file") -> str:
    """``text`` with the lines between the markers replaced by one ``- NAME==VERSION`` per pin."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise LockError(f"{source}: expected one '{BEGIN}' line followed by one '{END}' line")
    start, end = starts[0], ends[0]
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    pinned = [f"{indent}- {name}=={version}" for name, version in sorted(pins.items())]
    return "\n".join([*lines[: start + 1], *pinned, *lines[end:]]) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    lock, env = Path(argv[0]), Path(argv[1])
    try:
        env.write_text(with_pins(env.read_text(encoding="utf-8"), read_pins(lock), str(env)), encoding="utf-8")
    except (OSError, LockError) as exc:
        print(f"conda_pins.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
