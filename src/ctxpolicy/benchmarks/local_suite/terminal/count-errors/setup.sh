#!/bin/bash
set -e
for i in $(seq 1 40); do
  case $((i % 7)) in
    0) echo "2026-01-01T00:00:$((i % 60)) ERROR request $i failed: timeout" ;;
    3) echo "2026-01-01T00:00:$((i % 60)) WARNING slow request $i" ;;
    *) echo "2026-01-01T00:00:$((i % 60)) INFO request $i ok" ;;
  esac
done > app.log
echo "2026-01-01T00:01:00 INFO ERRORS so far: see above" >> app.log
