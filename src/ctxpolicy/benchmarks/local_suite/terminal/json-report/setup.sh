#!/bin/bash
set -e
cat > users.csv <<'CSV'
name,age,country
Ada,36,UK
Grace,45,US
Linus,28,FI
Guido,41,NL
Margaret,33,US
Ken,50,US
Barbara,29,US
Tim,38,UK
CSV
