#!/usr/bin/env python3
"""test/t/delay_proxy.py -- a TCP proxy to Redis that holds back one reply.

    delay_proxy.py LISTEN_PORT REDIS_PORT DELAY_MS EVENTS_FILE [hold]

Until it gets SIGUSR1 it forwards both ways at once.  After SIGUSR1:

  - the next complete command a client sends (a RESP array, as hiredis
    writes them) is forwarded to Redis: event "forwarded <ms>";
  - everything any client sends after that command is dropped, on new
    connections too: nothing more reaches Redis through the proxy;
  - every byte Redis sends after that command reaches the client DELAY_MS
    after it arrived: events "held <ms> <bytes>", then "released <ms>".

So the command runs in Redis at once and its reply is read DELAY_MS later,
and it is the last command Redis gets from behind the proxy.

With "hold", that next command is held back instead (event "held-command")
until SIGUSR2, which forwards it ("forwarded"); from there on as above: its
reply DELAY_MS later, nothing more reaches Redis.  So a command can be made
to run in Redis after commands other clients send directly.  Its connection
to Redis stays open should its client close meanwhile (give up on it), as
Redis runs a command already in its socket whose client has gone: so a
client's command can also run after that client's own later ones, sent on
a new connection.  Times are
wall-clock milliseconds (time.time()), on the clock of PostgreSQL's
clock_timestamp().  Events are appended to EVENTS_FILE, one a line, the
first "listening <ms>" once connections are accepted.

The one thing to know before editing: one thread, one select loop; the
signal only writes to a socket pair the loop watches, so it never runs in
the middle of a forward.
"""
import heapq
import os
import selectors
import signal
import socket
import sys
import time

listen_port, redis_port, delay_ms = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
events = open(sys.argv[4], "a", buffering=1)
hold = len(sys.argv) > 5 and sys.argv[5] == "hold"


def event(*words):
    events.write(" ".join(str(w) for w in words) + "\n")


def now_ms():
    return time.time() * 1000


def command_end(buf):
    """Index just past the first complete RESP command in buf, or None."""
    if not buf.startswith(b"*"):
        i = buf.find(b"\r\n")  # an inline command: one line
        return None if i < 0 else i + 2
    i = buf.find(b"\r\n")
    if i < 0:
        return None
    pos = i + 2
    for _ in range(int(buf[1:i])):
        j = buf.find(b"\r\n", pos)
        if j < 0:
            return None
        pos = j + 2 + int(buf[pos + 1:j]) + 2  # "$<len>\r\n<bytes>\r\n"
        if pos > len(buf):
            return None
    return pos


sel = selectors.DefaultSelector()
state = "pass"          # pass -> armed (SIGUSR1) [-> holding -> SIGUSR2] -> cut (the command went)
held_command = None     # hold: (client socket, the command's bytes)
held_up = None          # hold: that client's connection to Redis
pending = []            # (due ms, seq, client socket, bytes): held replies
seq = 0
peer = {}               # socket -> its other end (None: a client cut off)
armed_buf = {}          # client socket -> bytes read while armed

wake_r, wake_w = socket.socketpair()
wake_r.setblocking(False)
wake_w.setblocking(False)
signal.set_wakeup_fd(wake_w.fileno())
signal.signal(signal.SIGUSR1, lambda *_: None)
signal.signal(signal.SIGUSR2, lambda *_: None)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen_port))
srv.listen(16)
sel.register(srv, selectors.EVENT_READ, "accept")
sel.register(wake_r, selectors.EVENT_READ, "signal")
event("listening", "%.3f" % now_ms())


def close(s):
    for x in (s, peer.get(s)):
        # The held command's way to Redis outlives its client (see above).
        if x is not None and x in peer and not (state == "holding" and x is held_up):
            sel.unregister(x)
            del peer[x]
            armed_buf.pop(x, None)
            x.close()


while True:
    timeout = None
    if pending:
        timeout = max(0.0, (pending[0][0] - now_ms()) / 1000)
    for key, _ in sel.select(timeout):
        s, kind = key.fileobj, key.data
        if kind == "signal":
            sigs = wake_r.recv(64)
            if state == "pass" and signal.SIGUSR1 in sigs:
                state = "armed"
                event("armed", "%.3f" % now_ms())
            elif state == "holding" and signal.SIGUSR2 in sigs:
                c, command = held_command
                held_up.sendall(command)
                state = "cut"
                event("forwarded", "%.3f" % now_ms(), len(command))
            continue
        if kind == "accept":
            c, _ = srv.accept()
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            u = None
            if state != "cut":
                u = socket.create_connection(("127.0.0.1", redis_port))
                u.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                peer[u] = c
                sel.register(u, selectors.EVENT_READ, "server")
            peer[c] = u
            sel.register(c, selectors.EVENT_READ, "client")
            event("connection", "%.3f" % now_ms(), "cut" if u is None else "forwarded")
            continue
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            close(s)
            continue
        if kind == "server":
            if state == "cut":
                t = now_ms()
                seq += 1
                heapq.heappush(pending, (t + delay_ms, seq, peer[s], data))
                event("held", "%.3f" % t, len(data))
            else:
                peer[s].sendall(data)
        elif state == "pass":
            peer[s].sendall(data)
        elif state == "armed" and peer[s] is not None:
            buf = armed_buf.get(s, b"") + data
            end = command_end(buf)
            if end is None:
                armed_buf[s] = buf
                continue
            if hold:
                held_command = (s, buf[:end])
                held_up = peer[s]
                state = "holding"
                event("held-command", "%.3f" % now_ms(), end)
                continue
            peer[s].sendall(buf[:end])
            state = "cut"
            event("forwarded", "%.3f" % now_ms(), end)
        # cut: dropped
    while pending and pending[0][0] <= now_ms():
        _, _, c, data = heapq.heappop(pending)
        if c in peer:
            try:
                c.sendall(data)
            except OSError:
                close(c)
                continue
            event("released", "%.3f" % now_ms(), len(data))
