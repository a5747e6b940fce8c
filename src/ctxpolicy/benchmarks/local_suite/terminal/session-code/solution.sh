#!/bin/bash
code=$(./init.sh | sed -n 's/^Session code: //p')
mkdir -p logs
ls *.log | sort > /tmp/moved
mv *.log logs/
mv /tmp/moved logs/index.txt
rm -f *.tmp
echo "$code" > session.txt
