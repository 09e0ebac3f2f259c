#!/usr/bin/python3
"""forkbox code kernel: the long-lived interpreter behind one code context, driven by the guest.

Requests arrive as JSON lines on stdin; messages leave as JSON lines on fd 3:
  {"t": "ready"}                                   after start-up (and the template's preload)
  {"t": "stream", "name": "stdout"|"stderr", "text": ...}   Python-level output, in order
  {"t": "display", "main": bool, "data": {"text": ..., "png": ..., ...}}
  {"t": "done", "count": n|null, "error": {name, value, traceback}|null}   one per request
fd 1 and 2 stay pipes the guest reads, so output of subprocesses and C code is captured too.
A SIGINT (the guest's interrupt) raises KeyboardInterrupt in the running cell.
Languages: python (IPython when the template has it, plain exec otherwise) and bash.

Given a socket (FORKBOX_KERNEL_ZYGOTE=fd), a Python kernel forks a *zygote* once its preload is
done and before any cell: a pristine copy of itself that forks the kernel of each new code context
(see `zygote`), which starts warm instead of importing everything again.
"""

import ast
import base64
import gc
import io
import json
import os
import random
import re
import signal
import socket
import struct
import sys
import threading
import traceback
import warnings

MSG_FD = 3
ZYGOTE_FD_ENV = "FORKBOX_KERNEL_ZYGOTE"
# where requests are read (fd 0 is /dev/null for cells); above the zygote's socket (fd 4)
REQUESTS_FD = 9
KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))
_emit_lock = threading.Lock()
# what a figure, a DataFrame's data or any other value may weigh in one message
MAX_JSON_CELLS = 100_000
MIME_FIELDS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/svg+xml": "svg",
    "application/json": "json",
    "text/latex": "latex",
    "application/javascript": "javascript",
    "application/pdf": "pdf",
    # not a real MIME type: a DataFrame's columns as lists (E2B's `data`)
    "forkbox/data": "data",
    # nor this: a figure's chart as data (E2B's `chart`, forkbox_charts)
    "forkbox/chart": "chart",
}


def emit(msg):
    data = (json.dumps(msg, separators=(",", ":"), default=str) + "\n").encode()
    with _emit_lock:
        view = memoryview(data)
        while view:
            view = view[os.write(MSG_FD, view) :]


class MessageStream(io.TextIOBase):
    """sys.stdout / sys.stderr of the kernel: text goes out as stream messages, line by line."""

    def __init__(self, name, fd):
        self.name = name
        self._fd = fd
        self._buf = []
        self._size = 0
        self._lock = threading.Lock()

    def writable(self):
        return True

    def fileno(self):
        # code that hands sys.stdout to a subprocess writes to the pipe the guest reads
        return self._fd

    def isatty(self):
        return False

    @property
    def encoding(self):
        return "utf-8"

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        if not s:
            return 0
        with self._lock:
            self._buf.append(s)
            self._size += len(s)
            flush = "\n" in s or self._size >= 8192
        if flush:
            self.flush()
        return len(s)

    def flush(self):
        with self._lock:
            text = "".join(self._buf)
            self._buf = []
            self._size = 0
        if text:
            emit({"t": "stream", "name": self.name, "text": text})


def mime_to_fields(bundle):
    data = {}
    extra = {}
    for mime, value in bundle.items():
        field = MIME_FIELDS.get(mime)
        if isinstance(value, bytes):
            value = base64.b64encode(value).decode()
        if field:
            data[field] = value
        else:
            extra[mime] = value
    if extra:
        data["extra"] = extra
    return data


def dataframe_json(obj):
    """A pandas DataFrame's data as {columns, index, data}, when it is small enough to send."""
    mod = type(obj).__module__ or ""
    if type(obj).__name__ != "DataFrame" or not mod.startswith("pandas"):
        return None
    try:
        if obj.size > MAX_JSON_CELLS:
            return None
        return json.loads(obj.to_json(orient="split", date_format="iso", default_handler=str))
    except Exception:  # noqa: BLE001 - the html and text forms are still sent
        return None


def table_columns(table):
    """A DataFrame's split JSON (dataframe_json) as {column: [values]}, as E2B's `data` has it."""
    columns = [str(c) for c in table.get("columns", [])]
    rows = table.get("data", [])
    return {c: [row[i] for row in rows] for i, c in enumerate(columns)}


def plain_text(value):
    """A result's text: a string as itself (as E2B's interpreter shows it), anything else its repr."""
    return value if isinstance(value, str) else repr(value)


# ---- matplotlib ----------------------------------------------------------------------------
# Figures are rendered to PNG when the cell calls plt.show() and when it ends with figures open,
# then closed, as a notebook's inline backend does.

warnings.filterwarnings("ignore", message="Matplotlib is currently using agg")
warnings.filterwarnings("ignore", message=".*non-interactive, and thus cannot be shown")
_patched_pyplot = None


_charts = None


def charts_module():
    """forkbox_charts, beside this file (loaded by path: the kernel's dir is not on sys.path)."""
    global _charts
    if _charts is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location("forkbox_charts", os.path.join(KERNEL_DIR, "forkbox_charts.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _charts = module
    return _charts


def figure_bundle(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = {"png": base64.b64encode(buf.getvalue()).decode(), "text": repr(fig)}
    try:
        chart = charts_module().chart_of(fig)
    except Exception as e:  # noqa: BLE001 - the figure shows; only its chart is lost
        print(f"forkbox: cannot read the chart of {fig!r}: {type(e).__name__}: {e}", file=sys.__stderr__)
        chart = None
    if chart is not None:
        data["chart"] = chart
    return data


def flush_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        fig = plt.figure(num)
        try:
            emit({"t": "display", "main": False, "data": figure_bundle(fig)})
        except Exception as e:  # noqa: BLE001 - a figure that cannot render is reported, not fatal
            print(f"cannot render figure {num}: {type(e).__name__}: {e}", file=sys.stderr)
    plt.close("all")


def patch_pyplot():
    global _patched_pyplot
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or plt is _patched_pyplot:
        return
    plt.show = lambda *args, **kwargs: flush_figures()
    _patched_pyplot = plt
    try:
        import matplotlib.axes

        charts_module().patch_axes(matplotlib.axes.Axes)
    except Exception as e:  # noqa: BLE001 - plots still work; box plots lose their chart
        print(f"forkbox: box plot charts unavailable: {type(e).__name__}: {e}", file=sys.__stderr__)


# ---- PIL -------------------------------------------------------------------------------------
# As E2B's interpreter: an image's show() displays it, and so does its save() (after saving).


def patch_pil(module):
    cls = getattr(module, "Image", None)
    if cls is None or getattr(cls, "_forkbox_patched", False):
        return
    save = cls.save

    def display_image(img):
        buf = io.BytesIO()
        try:
            save(img, buf, format="PNG")
        except Exception as e:  # noqa: BLE001 - an image PNG cannot hold is not displayed
            print(f"cannot display the image: {type(e).__name__}: {e}", file=sys.stderr)
            return
        sys.stdout.flush()
        emit({"t": "display", "main": False, "data": {"png": base64.b64encode(buf.getvalue()).decode(), "text": repr(img)}})

    def saved(self, fp, format=None, **params):
        save(self, fp, format, **params)
        # a cell's own save shows the image; a library saving through PIL (matplotlib's savefig) does not
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if not caller.startswith(("matplotlib", "PIL")):
            display_image(self)

    cls.show = lambda self, *args, **kwargs: display_image(self)
    cls.save = saved
    cls._forkbox_patched = True


class PostImportHooks:
    """Runs a patch right after a module is first imported (in whichever cell imports it)."""

    hooks = {"PIL.Image": patch_pil}

    def find_spec(self, name, path, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    try:
                        hook(module)
                    except Exception:  # noqa: BLE001 - the module works unpatched
                        pass

                spec.loader.exec_module = exec_module
                return spec
        return None


# ---- python --------------------------------------------------------------------------------


def error_of(etype, value, tb_text):
    return {"name": getattr(etype, "__name__", str(etype)), "value": str(value), "traceback": tb_text}


class IPythonRunner:
    """IPython's InteractiveShell in this process: magics, `!cmd`, rich display, execution counts."""

    def __init__(self):
        from IPython.core.displayhook import DisplayHook
        from IPython.core.displaypub import DisplayPublisher
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        runner = self

        class Hook(DisplayHook):
            def write_output_prompt(self):
                pass

            def compute_format_data(self, result):
                fmt, md = super().compute_format_data(result)
                if isinstance(result, str):
                    fmt = dict(fmt, **{"text/plain": result})
                table = dataframe_json(result)
                if table is not None:
                    fmt = dict(fmt, **{"forkbox/data": table_columns(table)})
                    if "application/json" not in fmt:
                        fmt["application/json"] = table
                return fmt, md

            def write_format_data(self, format_dict, md_dict=None):
                sys.stdout.flush()
                emit({"t": "display", "main": True, "data": mime_to_fields(format_dict)})

        class Publisher(DisplayPublisher):
            def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
                sys.stdout.flush()
                emit({"t": "display", "main": False, "data": mime_to_fields(data)})

            def clear_output(self, wait=False):
                pass

        class Shell(InteractiveShell):
            # `!cmd` through a plain subprocess writing to our fd 1 and 2 (the piped default
            # needs a pty); `x = !cmd` (getoutput) already uses pipes
            system = InteractiveShell.system_raw

            def _showtraceback(self, etype, evalue, stb):
                runner.error = error_of(etype, evalue, "\n".join(stb))

            def showindentationerror(self):
                self.showsyntaxerror()

        config = Config()
        config.HistoryManager.enabled = False
        self.error = None
        self.shell = Shell.instance(
            config=config, displayhook_class=Hook, display_pub_class=Publisher, colors="NoColor"
        )

    def run(self, code, silent=False):
        self.error = None
        result = self.shell.run_cell(code, store_history=not silent, silent=silent)
        count = None if silent else self.shell.execution_count - 1
        return count, self.error if (result.error_before_exec or result.error_in_exec) else None


class PlainRunner:
    """Templates without IPython: exec the cell, evaluate a trailing expression, show its repr."""

    def __init__(self):
        self.ns = {"__name__": "__main__", "__builtins__": __builtins__}
        self.count = 0

    def display(self, value):
        data = {"text": plain_text(value)}
        for method, field in (
            ("_repr_html_", "html"),
            ("_repr_markdown_", "markdown"),
            ("_repr_png_", "png"),
            ("_repr_svg_", "svg"),
            ("_repr_latex_", "latex"),
            ("_repr_json_", "json"),
        ):
            fn = getattr(value, method, None)
            if callable(fn):
                try:
                    out = fn()
                except Exception:  # noqa: BLE001 - a broken repr is skipped, like IPython does
                    continue
                if out is not None:
                    data[field] = base64.b64encode(out).decode() if isinstance(out, bytes) else out
        table = dataframe_json(value)
        if table is not None:
            data.setdefault("json", table)
            data["data"] = table_columns(table)
        self.ns["_"] = value
        emit({"t": "display", "main": True, "data": data})

    def run(self, code, silent=False):
        if not silent:
            self.count += 1
        name = f"<cell-{self.count}>"
        try:
            tree = ast.parse(code, name, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(";"):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, name, "exec"), self.ns)
            if last is not None:
                value = eval(compile(last, name, "eval"), self.ns)
                if value is not None:
                    sys.stdout.flush()
                    self.display(value)
        except BaseException as e:  # noqa: BLE001 - every error belongs to the cell, KeyboardInterrupt too
            tb = e.__traceback__
            # drop this function's own frame
            if tb is not None and tb.tb_frame.f_code is PlainRunner.run.__code__:
                tb = tb.tb_next
            text = "".join(traceback.format_exception(type(e), e, tb))
            return (None if silent else self.count), error_of(type(e), e, text)
        return (None if silent else self.count), None


def python_runner():
    try:
        return IPythonRunner()
    except ImportError:
        return PlainRunner()


# ---- bash ----------------------------------------------------------------------------------


class BashRunner:
    """One bash process for the context: cwd, variables and functions persist between cells."""

    def __init__(self):
        import subprocess

        self.status_r, status_w = os.pipe()
        self.status_fd = status_w
        self.proc = subprocess.Popen(
            ["/bin/bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            pass_fds=(status_w,),
            start_new_session=False,
        )
        os.close(status_w)
        self.reader = os.fdopen(self.status_r, "r")
        self.count = 0
        self.cell_file = f"/tmp/.forkbox-cell-{os.getpid()}.sh"
        # an interrupt ends the running command, not the shell
        self._send("trap : INT\n")
        self.run("true", silent=True)

    def _send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def run(self, code, silent=False):
        if not silent:
            self.count += 1
        with open(self.cell_file, "w") as f:
            f.write(code + "\n")
        self._send(f'source {self.cell_file} </dev/null; printf "%d\\n" $? >&{self.status_fd}\n')
        while True:
            try:
                line = self.reader.readline()
                break
            except KeyboardInterrupt:
                continue  # the same SIGINT reached the command; its status follows
        if not line:
            raise SystemExit("bash exited")
        status = int(line.strip() or 0)
        count = None if silent else self.count
        if status == 0:
            return count, None
        name = "KeyboardInterrupt" if status == 130 else "NonZeroExit"
        return count, {"name": name, "value": f"exit code {status}", "traceback": ""}


def reseed():
    """Fresh random state, as a process of its own needs (a restore from a shared image, a fork)."""
    random.seed()
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()


# ---- zygote --------------------------------------------------------------------------------

ZYGOTE_MSG_BYTES = 1 << 20
ZYGOTE_FDS = 4  # a new kernel's requests (read end), stdout, stderr and messages (write ends)


def start_zygote(sock_fd):
    """Forks the zygote (in a session of its own, orphaned to the namespace's init, so neither this
    kernel's interrupts nor its end reach it). Returns here, and in each kernel the zygote forks,
    which then goes on as a new context's kernel."""
    # the collector never walks what the preload made (under gVisor the refcounts alone still
    # copy most pages after a fork: docs/design-notes.md)
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            zygote(socket.socket(fileno=sock_fd))
            return
        except BaseException:  # noqa: BLE001 - a zygote that cannot serve just ends; contexts start fresh
            os._exit(1)
    os.close(sock_fd)
    os.waitpid(pid, 0)


def zygote(sock):
    """Serves fork requests ({"id", "cwd", "env"} with ZYGOTE_FDS fds) until the guest closes the
    socket; reports each kernel's exit ({"exit": pid, "status": wait status}). Returns only in a
    forked kernel, after it said hello."""

    def reap(signum, frame):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            sock.send(json.dumps({"exit": pid, "status": status}).encode())

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, reap)
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, ZYGOTE_MSG_BYTES, ZYGOTE_FDS)
        if not msg:
            os._exit(0)
        try:
            req = json.loads(msg)
            if len(fds) != ZYGOTE_FDS:
                raise ValueError(f"{len(fds)} fds")
            pid = os.fork()
        except (ValueError, OSError) as e:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"id": req.get("id") if isinstance(req, dict) else None, "error": str(e)}).encode())
            continue
        if pid == 0:
            become_kernel(sock, req, fds)
            return
        for fd in fds:
            os.close(fd)


def become_kernel(sock, req, fds):
    """In a kernel the zygote just forked: take the context's pipes, cwd and env, fresh random
    state, and say hello with credentials (the guest learns this process's pid in its own view)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()
    error = None
    try:
        for fd, target in zip(fds, (REQUESTS_FD, 1, 2, MSG_FD)):
            os.dup2(fd, target)
        for fd in fds:
            if fd not in (REQUESTS_FD, 1, 2, MSG_FD):
                os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
    except (OSError, KeyError, TypeError) as e:
        error = f"{e.strerror or e}: {e.filename or ''}" if isinstance(e, OSError) else str(e)
    reseed()
    hello = {"id": req.get("id"), "pid": os.getpid()}
    if error:
        hello["error"] = error
    creds = struct.pack("3i", os.getpid(), os.getuid(), os.getgid())
    sock.sendmsg([json.dumps(hello).encode()], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])
    sock.close()
    if error:
        os._exit(127)


# ---- main ----------------------------------------------------------------------------------


class Kernel:
    def __init__(self, language):
        self.language = language
        self.sandbox_env = set()
        self.runner = BashRunner() if language == "bash" else python_runner()

    def configure(self, req):
        """A restore from a shared image: new sandbox-level env, and fresh random state."""
        env = {str(k): str(v) for k, v in (req.get("env") or {}).items()}
        if not req.get("merge"):
            for key in self.sandbox_env - set(env):
                os.environ.pop(key, None)
            self.sandbox_env = set()
        os.environ.update(env)
        self.sandbox_env |= set(env)
        if req.get("reseed"):
            reseed()
        if self.language == "bash" and env:
            exports = "".join(f"export {k}={shell_quote(v)}\n" for k, v in env.items())
            self.runner.run(exports, silent=True)

    def run(self, req):
        env = {str(k): str(v) for k, v in (req.get("env") or {}).items()}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        code = req.get("code", "")
        restore = ""
        if self.language == "bash" and env:
            names = [k for k in env if SHELL_NAME.match(k)]
            # the shell's own values come back after the cell, as they were (set or not)
            code = "".join(f"__fbx_had_{k}=${{{k}+1}} __fbx_old_{k}=${{{k}-}}\n" for k in names) + "".join(
                f"export {k}={shell_quote(env[k])}\n" for k in names
            ) + code
            restore = "".join(
                f'if [ -n "$__fbx_had_{k}" ]; then {k}="$__fbx_old_{k}"; else unset {k}; fi; unset __fbx_had_{k} __fbx_old_{k}\n'
                for k in names
            )
        try:
            patch_pyplot()
            try:
                count, error = self.runner.run(code, silent=bool(req.get("silent")))
            finally:
                if restore:
                    self.runner.run(restore, silent=True)
            if self.language == "python":
                patch_pyplot()
                flush_figures()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return count, error


SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def shell_quote(value):
    return "'" + value.replace("'", "'\\''") + "'"


def main():
    language = sys.argv[1] if len(sys.argv) > 1 else "python"
    # the kernel's own module must not shadow user modules named like it
    sys.path[:] = [p for p in sys.path if p != KERNEL_DIR]
    sys.path.insert(0, "")
    sys.stdout = MessageStream("stdout", 1)
    sys.stderr = MessageStream("stderr", 2)
    # cells read no stdin: a stray input() gets EOF instead of eating the next request
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(0, REQUESTS_FD)
    os.dup2(null, 0)
    os.close(null)
    stdin = os.fdopen(REQUESTS_FD, "r", encoding="utf-8", errors="replace")
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the kernel
    if language == "python":
        sys.meta_path.insert(0, PostImportHooks())
    kernel = Kernel(language)
    preload = os.environ.pop("FORKBOX_KERNEL_PRELOAD", "")
    if preload and language == "python":
        _, error = kernel.runner.run(preload, silent=True)
        if error:
            print(f"forkbox: the template's preload failed: {error['name']}: {error['value']}", file=sys.stderr)
        patch_pyplot()
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            # render once, so the first figure of a cell skips font loading
            fig = plt.figure()
            fig.savefig(io.BytesIO(), format="png")
            plt.close(fig)
    sys.stdout.flush()
    sys.stderr.flush()
    zygote_fd = os.environ.pop(ZYGOTE_FD_ENV, "")
    if zygote_fd.isdigit():
        if language == "python" and hasattr(socket, "recv_fds"):
            start_zygote(int(zygote_fd))  # it returns in each kernel it forks too, which goes on as that one
        else:
            os.close(int(zygote_fd))  # the guest sees no zygote come
    emit({"t": "ready", "pid": os.getpid()})
    while True:
        try:
            line = stdin.readline()
        except KeyboardInterrupt:
            continue  # an interrupt that arrived after its cell ended
        if not line:
            return
        try:
            req = json.loads(line)
            if req.get("op") == "configure":
                kernel.configure(req)
                emit({"t": "done", "count": None, "error": None})
            else:
                count, error = kernel.run(req)
                emit({"t": "done", "count": count, "error": error})
        except KeyboardInterrupt:
            emit({"t": "done", "count": None, "error": error_of(KeyboardInterrupt, "", "KeyboardInterrupt")})
        except SystemExit:
            raise
        except BaseException as e:  # noqa: BLE001 - the kernel outlives one broken request
            emit({"t": "done", "count": None, "error": error_of(type(e), e, traceback.format_exc())})


if __name__ == "__main__":
    main()
