"""Write a thresholds file from the config's preset (source: preset), atomically.

    python workflow/scripts/preset_thresholds.py --config C --benchmark B --model M --out FILE

Same layout as `ctxpolicy calibrate` writes (docs/architecture.md), so Th cells and Table 6
read one kind of file whichever the source; settings the preset leaves out are null.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ctxpolicy.atomic import atomic_write_json
from ctxpolicy.config import SETTINGS, ConfigError, load_config


def preset_thresholds(config: dict, benchmark: str, model: str) -> dict:
    source = config["thresholds"].get(benchmark, {}).get(model)
    if not source or source["source"] != "preset":
        raise ConfigError(f"thresholds.{benchmark}.{model}: {source!r} is not a preset")
    return {"source": "preset", **{s: source.get(s) for s in SETTINGS}, "percentiles": {}, "peaks": []}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        data = preset_thresholds(load_config(args.config), args.benchmark, args.model)
    except ConfigError as exc:
        print(f"preset_thresholds: {exc}", file=sys.stderr)
        return 2
    atomic_write_json(args.out, data, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
