#!/bin/sh
# usage: queue.sh "script ver" ...
cd /work/main
for item in "$@"; do
  set -- $item
  log=/tmp/rc/log-$(basename $1 .py)-$2-$(date +%s).log
  echo "START $item $(date +%T) -> $log" >> /tmp/rc/queue.log
  python /tmp/rc/$1 $2 $3 > $log 2>&1
  echo "END $item $(date +%T)" >> /tmp/rc/queue.log
done
