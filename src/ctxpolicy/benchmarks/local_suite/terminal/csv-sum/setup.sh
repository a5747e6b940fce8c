#!/bin/bash
set -e
python - <<'PY'
import csv
regions = ["west", "east", "north", "west", "south"]
with open("sales.csv", "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["region", "product", "amount"])
    for i in range(30):
        w.writerow([regions[i % 5], f"item-{i}", f"{(i * 37 % 100) + 0.25 * (i % 4):.2f}"])
PY
