#!/bin/bash
chmod +x run.sh
./run.sh > run_output.txt
