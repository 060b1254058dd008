#!/bin/bash
# Run from the repo root after `make build`: bash bench/metrics-scrape.sh (issue 13, bench/RESULTS.md)
# scrape cost: agent CPU (utime+stime from /proc) over N scrapes vs the same wall time idle
d=$(mktemp -d); port=19477
bin/kreplay agent --data-dir $d --node sb --quiet --comm nobody-sb --metrics-listen 127.0.0.1:$port --log-format text 2>/dev/null &
pid=$!; sleep 4
# the launcher execs node: $pid is the agent
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
tck=$(getconf CLK_TCK)
for run in 1 2 3; do
  c0=$(cpu); t0=$(date +%s%N)
  for i in $(seq 200); do curl -s -o /dev/null 127.0.0.1:$port/metrics; done
  t1=$(date +%s%N); c1=$(cpu)
  wall=$(( (t1-t0)/1000000 ))
  sleep $(awk "BEGIN{print $wall/1000}")
  c2=$(cpu)
  echo "run $run: 200 scrapes in ${wall} ms wall ($(awk "BEGIN{printf \"%.2f\", $wall/200}") ms each incl. curl); agent cpu during scrapes $(( (c1-c0)*1000/tck )) ms, same time idle $(( (c2-c1)*1000/tck )) ms; per scrape $(awk "BEGIN{printf \"%.2f\", ($c1-$c0-($c2-$c1))*1000/$tck/200}") ms"
done
curl -s 127.0.0.1:$port/metrics | wc -c
kill $pid; wait $pid; rm -rf $d
