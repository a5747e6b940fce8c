#!/bin/bash
find data -type f -printf "%s %p\n" | sort -n | tail -1 | cut -d" " -f2 > largest.txt
