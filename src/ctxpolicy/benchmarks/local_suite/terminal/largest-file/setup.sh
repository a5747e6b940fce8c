#!/bin/bash
set -e
mkdir -p data/logs/2025 data/cache data/img/thumbs
head -c 1200 /dev/zero > data/logs/2025/jan.log
head -c 5300 /dev/zero > data/cache/blob-17.bin
head -c 5299 /dev/zero > data/img/cover.png
head -c 800 /dev/zero > data/img/thumbs/t1.png
head -c 64 /dev/zero > data/README
