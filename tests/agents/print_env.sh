#!/bin/sh
# Prints the environment the agent was given, so a test can look for leaks.
cat >/dev/null
env
