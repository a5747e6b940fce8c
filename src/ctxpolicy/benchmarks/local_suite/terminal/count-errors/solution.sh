#!/bin/bash
grep -cw ERROR app.log > error_count.txt
