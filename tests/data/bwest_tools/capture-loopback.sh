#!/bin/bash
# pathload_rcv-loopback.txt (README.md): pathload on the loopback interface of a fresh
# network namespace, as root under the CPU lock:
#   mkdir OUT && cd OUT && flock /tmp/swell-cpu.lock PATH/TO/capture-loopback.sh
# rcv-lo.txt is the fixture.
ip netns add bwcaplo
ip netns exec bwcaplo ip link set lo up
ip netns exec bwcaplo /opt/bwtools/bin/pathload_snd -i -q > snd.txt 2>&1 &
SND=$!
for i in $(seq 50); do ip netns exec bwcaplo ss -ltnH sport = :55002 | grep -q . && break; sleep 0.1; done
ip netns exec bwcaplo timeout 60 /opt/bwtools/bin/pathload_rcv -s 127.0.0.1 -o lo.log > rcv-lo.txt 2>&1
echo "rcv exit $?"
kill $SND; wait $SND
ip netns del bwcaplo
