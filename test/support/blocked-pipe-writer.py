"""
Writes WRITES x 64 KiB to a pipe whose reader (a forked child) waits for a byte or the end of
stdin before it drains it: from the second write on, the program blocks in write() until then.
Tags itself with the transaction in argv[1] first ("-": untagged, as under `replay --exec`,
which tags the build itself). Prints its pid, then, at the end, the writes it made.
"""
import os
import sys

WRITES = 13
SIZE = 65536

if sys.argv[1] != "-":
    marker = os.open("/dev/null", os.O_WRONLY)
    os.write(marker, f"KREPLAY-CTX txn={sys.argv[1]}\n".encode())
    os.close(marker)
r, w = os.pipe()
reader = os.fork()
if reader == 0:
    os.close(w)
    sys.stdin.buffer.read(1)
    while os.read(r, SIZE):
        pass
    os._exit(0)
os.close(r)
print(os.getpid(), flush=True)
data = b"x" * SIZE
made = 0
for _ in range(WRITES):
    if os.write(w, data) != SIZE:
        sys.exit("a short write")
    made += 1
os.close(w)
os.waitpid(reader, 0)
print(made, flush=True)
