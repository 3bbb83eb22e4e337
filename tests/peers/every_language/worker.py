"""A holder of tests/it/every_language.rs, in Python: the mutex at PATH, HOLDS times, from when HISTORY.go exists.

Usage: worker.py HOSTS PATH curator|kazoo HOLDS HISTORY WHO
Each hold appends "enter W WHO TOKEN" after its acquire and "exit W WHO" before its release to
HISTORY, one os.write per line on an O_APPEND descriptor.
"""
import os
import sys
import time

import zklock


def main():
    hosts, path, protocol, holds, history, who = sys.argv[1:7]
    fd = os.open(history, os.O_WRONLY | os.O_APPEND)

    def append(line):
        data = line.encode()
        assert os.write(fd, data) == len(data)

    proto = zklock.Protocol.KAZOO if protocol == "kazoo" else zklock.Protocol.CURATOR
    with zklock.Client(hosts, protocol=proto) as client:
        lock = client.mutex(path)
        print("READY", flush=True)
        while not os.path.exists(history + ".go"):  # all holders start at once
            time.sleep(0.005)
        for _ in range(int(holds)):
            with lock:
                append(f"enter W {who} {lock.fencing_token}\n")
                time.sleep(0.005)
                append(f"exit W {who}\n")
    print(f"DONE {holds}", flush=True)


if __name__ == "__main__":
    main()
