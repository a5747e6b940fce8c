#!/bin/bash
python - <<'PY'
import csv, json
from collections import Counter
rows = list(csv.DictReader(open("users.csv")))
report = {
    "count": len(rows),
    "average_age": round(sum(int(r["age"]) for r in rows) / len(rows), 2),
    "by_country": dict(Counter(r["country"] for r in rows)),
}
json.dump(report, open("report.json", "w"))
PY
