"""forkbox guest daemon: PID 1 of every sandbox, serving exec/files/code to the agent over stdin/stdout.

Run as `python3 -u -S /opt/forkbox/forkbox_guest/__main__.py`. The wire format is in `wire`;
the program starts in `main`. Only the standard library is used: every template ships python3,
and every MB held here is copied on each restore.
"""
