#!/bin/sh
# Floods stdout with $1 numbered lines and ends with a marker line.
cat >/dev/null
i=0
while [ "$i" -lt "$1" ]; do
  echo "line $i of generous padding to make the output larger than the capture bounds"
  i=$((i + 1))
done
echo "THE END"
