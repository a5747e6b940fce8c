#!/bin/bash
# Terminal-Bench convention: the harness copies tests/ to $TEST_DIR after the agent finishes.
python -m pytest -rA -p no:cacheprovider "$TEST_DIR/test_outputs.py"
