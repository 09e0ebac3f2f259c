"""The code requests: run a cell, and create, list, restart, remove or warm up a code context."""

from __future__ import annotations

import os
from collections.abc import Callable

from .errors import os_error_code
from .files import makedirs_owned
from .kernels import LANGUAGES, Cell, Context
from .users import DEFAULT_CWD, DEFAULT_USER, check_env

TYPE_CHECKING = False  # pyright only: importing typing costs ~1 MB in every sandbox, copied on each restore
if TYPE_CHECKING:
    from .errors import Request
    from .state import Guest


# the default contexts a listing always shows (where the image has their interpreter)
DEFAULT_LISTED = ("python", "javascript")


def default_context(g: "Guest", language: str) -> Context:
    ctx = g.contexts.get(language)
    if ctx is None:
        ctx = g.contexts[language] = Context(g, language, language, None, DEFAULT_USER, {})
    return ctx


def context_of(g: "Guest", channel: int, req: Request) -> Context | None:
    """The context a request names (on the loop thread); reports the error itself when there is none."""
    cid = req.get("context")
    language = req.get("language") or "python"
    if cid:
        ctx = g.contexts.get(cid)
        if ctx is None:
            g.wire.send_error(channel, "CONTEXT_NOT_FOUND", f"no code context {cid}")
        return ctx
    if language not in LANGUAGES:
        g.wire.send_error(channel, "VALIDATION_FAILED", f"unsupported language {language}; supported: {', '.join(LANGUAGES)}")
        return None
    return default_context(g, language)


def op_run_code(g: "Guest", channel: int, req: Request) -> None:
    try:
        check_env(req.get("env"))
    except ValueError as e:
        return g.wire.send_error(channel, "VALIDATION_FAILED", str(e))
    ctx = context_of(g, channel, req)
    if ctx is not None:
        ctx.submit(Cell(g, channel, req))


def op_context_create(g: "Guest", channel: int, req: Request) -> None:
    language = req.get("language") or "python"
    if language not in LANGUAGES:
        return g.wire.send_error(channel, "VALIDATION_FAILED", f"unsupported language {language}; supported: {', '.join(LANGUAGES)}")
    user = req.get("user") or DEFAULT_USER
    try:
        pw = g.users.getpw(user)
        cwd = os.path.normpath(req.get("cwd") or DEFAULT_CWD or pw.pw_dir)
        if not os.path.isabs(cwd):
            raise ValueError(f"cwd must be an absolute path: {cwd}")
        makedirs_owned(cwd, pw.pw_uid, pw.pw_gid)
    except KeyError:
        return g.wire.send_error(channel, "VALIDATION_FAILED", f"unknown user: {user}")
    except ValueError as e:
        return g.wire.send_error(channel, "VALIDATION_FAILED", str(e))
    except OSError as e:
        return g.wire.send_error(channel, os_error_code(e), f"{e.strerror or e}: {e.filename or ''}")
    try:
        env = check_env(req.get("env"))
    except ValueError as e:
        return g.wire.send_error(channel, "VALIDATION_FAILED", str(e))
    cid = "ctx_" + os.urandom(6).hex()
    ctx = g.contexts[cid] = Context(g, cid, language, cwd, user, env)
    ctx.start()  # its interpreter warms up while the caller prepares the first cell
    g.wire.send_json(channel, {"type": "result", "value": ctx.describe()})


def op_context_list(g: "Guest", channel: int, req: Request) -> None:
    # the default contexts are listed before their first cell starts them, as E2B lists its own
    for language in DEFAULT_LISTED:
        if language not in g.contexts:
            ctx = Context(g, language, language, None, DEFAULT_USER, {})
            if ctx.available():
                g.contexts[language] = ctx
    g.wire.send_json(channel, {"type": "result", "value": [c.describe() for c in g.contexts.values()]})


def op_context_restart(g: "Guest", channel: int, req: Request) -> None:
    ctx = context_of(g, channel, req)
    if ctx is None:
        return
    ctx.stop()
    ctx.start()
    g.wire.send_json(channel, {"type": "result", "value": ctx.describe()})


def op_context_remove(g: "Guest", channel: int, req: Request) -> None:
    ctx = context_of(g, channel, req)
    if ctx is None:
        return
    ctx.stop()
    g.contexts.pop(ctx.id, None)
    g.wire.send_json(channel, {"type": "result", "value": {}})


def op_context_ready(g: "Guest", channel: int, req: Request) -> None:
    """Starts a context's kernel if needed and answers once it is ready (the bake's warm-up)."""
    ctx = context_of(g, channel, req)
    if ctx is None:
        return
    if ctx.proc is not None and ctx.proc.ready:
        return g.wire.send_json(channel, {"type": "result", "value": ctx.describe()})
    ctx.waiters.append(channel)
    ctx.pump()


def op_code_interrupt(g: "Guest", channel: int, req: Request) -> None:
    for ctx in g.contexts.values():
        ctx.interrupt(channel)


def forget_cells(g: "Guest") -> None:
    """On the loop thread, after a resync: cells of the old agent run on, unheard."""
    for ctx in g.contexts.values():
        if isinstance(ctx.cell, Cell):
            ctx.cell.channel = None
        ctx.queue = [item for item in ctx.queue if not isinstance(item, Cell)]
        ctx.waiters = []


def configure_contexts(g: "Guest", env: dict[str, str], merge: bool, reseed: bool) -> None:
    for ctx in g.contexts.values():
        if ctx.proc is not None or ctx.starting:
            ctx.submit({"op": "configure", "env": env, "merge": merge, "reseed": reseed})


CONTEXT_OPS: dict[str, Callable[["Guest", int, Request], None]] = {
    "run_code": op_run_code,
    "context_create": op_context_create,
    "context_list": op_context_list,
    "context_restart": op_context_restart,
    "context_remove": op_context_remove,
    "context_ready": op_context_ready,
    "interrupt": op_code_interrupt,
}
