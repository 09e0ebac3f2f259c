"""forkbox guest daemon: PID 1 of every sandbox, serving exec/files/code to the agent over stdin/stdout.

Run as `/opt/forkbox/runtime/bin/python3 -u -S /opt/forkbox/forkbox_guest/__main__.py`: the
runtime is the guest's own Python, mounted into every sandbox (the image needs none). The wire
format is in `wire`; the program starts in `main`. Only the standard library is used, and every
MB held here is copied on each restore.
"""
