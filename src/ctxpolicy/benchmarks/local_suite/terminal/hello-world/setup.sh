#!/bin/bash
# nothing to set up
true
