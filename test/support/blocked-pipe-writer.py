"""
Writes WRITES x 64 KiB to its stdout, a pipe whose reader waits before it drains it (a shell
pipeline: `python3 THIS TXN PIDFILE | { wait; cat >/dev/null; }`): from the second write on, the
program blocks in write() until then. Nothing runs between the interpreter's start and that
block but a marker and its pid, so a hook queued once it runs finds it blocked. Tags itself with
the transaction in argv[1] first ("-": untagged, as under `replay --exec`, which tags the build
itself); writes its pid to argv[2], then, at the end, the writes it made.
"""
import os
import sys

WRITES = 13
SIZE = 65536

if sys.argv[1] != "-":
    marker = os.open("/dev/null", os.O_WRONLY)
    os.write(marker, f"KREPLAY-CTX txn={sys.argv[1]}\n".encode())
    os.close(marker)
with open(sys.argv[2], "w") as out:
    out.write(f"{os.getpid()}\n")
data = b"x" * SIZE
made = 0
for _ in range(WRITES):
    if os.write(1, data) != SIZE:
        sys.exit("a short write")
    made += 1
with open(sys.argv[2], "a") as out:
    out.write(f"{made}\n")
