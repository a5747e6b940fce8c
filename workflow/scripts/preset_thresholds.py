"""Write a thresholds file from the config's preset (source: preset), atomically.

    python workflow/scripts/preset_thresholds.py --config C --benchmark B --model M --out FILE

Same layout as `ctxpolicy calibrate` writes (docs/architecture.md), so Th cells and Table 6
read one kind of file whichever the source; settings the preset leaves out are null.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from ctxpolicy.config import SETTINGS, ConfigError, load_config


def preset_thresholds(config: dict, benchmark: str, model: str) -> dict:
    source = config["thresholds"].get(benchmark, {}).get(model)
    if not source or source["source"] != "preset":
        raise ConfigError(f"thresholds.{benchmark}.{model}: {source!r} is not a preset")
    return {"source": "preset", **{s: source.get(s) for s in SETTINGS}, "percentiles": {}, "peaks": []}


def write_json_atomic(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as tmp:
        json.dump(data, tmp, indent=1)
        tmp.write("\n")
        tmp.flush()
        os.fsync(tmp.fileno())
    os.replace(tmp.name, path)


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
    write_json_atomic(args.out, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
