"""The daemon's state, all of it in one object that every handler is given."""

from __future__ import annotations

import threading
import time

from .users import Users
from .wire import Wire

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .execs import Exec
    from .files import FileWorkers, ThreadCredentials
    from .ioloop import IOLoop
    from .kernels import Context
    from .spawn import Spawner
    from .transfer import FileRead, Upload
    from .watch import Watch
    from .zygote import Zygote


class Guest:
    """What the daemon holds between requests. Built without side effects; `start` starts its
    threads and takes SIGCHLD (from the main thread)."""

    def __init__(self, wire: Wire) -> None:
        from .files import FileWorkers, ThreadCredentials, FILE_WORKERS, UPLOAD_QUEUE_CHUNKS
        from .ioloop import IOLoop
        from .spawn import Spawner

        self.wire = wire
        self.users = Users()
        self.started = time.monotonic()
        # settings of `configure`: every command and kernel gets them
        self.default_env: dict[str, str] = {}
        # the highest channel a request came on: a new agent is told to start past it
        self.max_channel = 0
        # exec requests in progress, by channel (from the main and spawner threads)
        self.execs: dict[int, Exec] = {}
        self.execs_lock = threading.Lock()
        # background processes by pid, and the channels attached to one (loop thread)
        self.procs: dict[int, Exec] = {}
        self.subs: dict[int, Exec] = {}
        # code contexts by id (loop thread)
        self.contexts: dict[str, Context] = {}
        # the warm Python kernel new contexts are forked from, once one carries it (loop thread)
        self.zygote: Zygote | None = None
        # file reads by channel; uploads by channel, None for a refused one whose chunks are dropped
        self.reads: dict[int, FileRead] = {}
        self.uploads_open: dict[int, Upload | None] = {}
        # directory watches by channel (set up on a file worker, read on the loop thread), and the
        # channels stopped before their watch was set up; the lock hands a watch from one to the other
        self.watches: dict[int, Watch] = {}
        self.watch_stops: set[int] = set()
        self.watch_lock = threading.Lock()
        self.loop: IOLoop = IOLoop(self)
        self.spawner: Spawner = Spawner(self)
        self.creds: ThreadCredentials = ThreadCredentials()
        # stat, list, mkdir, remove, rename, reads
        self.files: FileWorkers = FileWorkers("files", FILE_WORKERS)
        # one thread: an upload's open, chunks and end stay in order
        self.uploads: FileWorkers = FileWorkers("upload", 1, UPLOAD_QUEUE_CHUNKS)

    def start(self) -> None:
        self.loop.start()
        self.spawner.start()
        self.files.start()
        self.uploads.start()
