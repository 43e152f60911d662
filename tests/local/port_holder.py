"""Holds a TCP port as a listening socket (as another job's store would), for the rendezvous tests.

port_holder.py PORT SECONDS
"""

import socket
import sys
import time

holder = socket.socket()
holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore binds: only a listener blocks it
holder.bind(("", int(sys.argv[1])))
holder.listen(16)
print(f"HOLDING {sys.argv[1]}", flush=True)
time.sleep(float(sys.argv[2]))
