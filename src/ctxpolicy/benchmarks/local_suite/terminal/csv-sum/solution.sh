#!/bin/bash
python -c "
import csv
rows = csv.DictReader(open('sales.csv'))
print(f\"{sum(float(r['amount']) for r in rows if r['region'] == 'west'):.2f}\")
" > west_total.txt
