"""A COPY/ADD step, run inside the build sandbox (never on the host): copies from a read-only mount
of the context (or another stage's rootfs) into the image the way Docker does. Symlinks resolve
inside the sandbox, so one the image or the context plants cannot lead anywhere but the sandbox.

Reads one JSON request on stdin: root, sources, dest, only (the context's kept paths, or null),
chown, chmod, extract, keep_owner."""

import glob
import grp
import json
import os
import pwd
import shutil
import stat
import sys
import tarfile

req = json.load(sys.stdin)
root = req["root"]
only = set(req["only"]) if req.get("only") is not None else None
# dirs holding a kept entry: walked even when .dockerignore excludes the dir itself
holding = {rel.rsplit("/", i)[0] for rel in (only or ()) for i in range(1, rel.count("/") + 1)}
mode = int(req["chmod"], 8) if req.get("chmod") else None
copied = 0


def ids(spec):
    if not spec:
        return None
    user, _, group = spec.partition(":")
    uid = int(user) if user.isdigit() else pwd.getpwnam(user).pw_uid
    if group:
        gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
    else:
        gid = uid if user.isdigit() else pwd.getpwnam(user).pw_gid
    return uid, gid


owner = ids(req.get("chown"))


def kept(rel):
    return only is None or rel in only


def set_meta(path, st, is_link=False):
    uid, gid = owner if owner else ((st.st_uid, st.st_gid) if req.get("keep_owner") else (0, 0))
    os.lchown(path, uid, gid)
    if is_link:
        return
    os.chmod(path, mode if mode is not None else stat.S_IMODE(st.st_mode))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def make_parents(path):
    parent = os.path.dirname(path)
    missing = []
    while parent and not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for d in reversed(missing):
        os.mkdir(d, 0o755)
        if owner:
            os.chown(d, *owner)


def clear(path):
    """An existing non-directory at `path` is replaced, as Docker does."""
    if os.path.lexists(path) and not (os.path.isdir(path) and not os.path.islink(path)):
        os.unlink(path)


def copy_entry(src, dst):
    global copied
    st = os.lstat(src)
    make_parents(dst)
    if stat.S_ISDIR(st.st_mode):
        if not os.path.isdir(dst):
            clear(dst)
            os.mkdir(dst)
        set_meta(dst, st)
    elif stat.S_ISLNK(st.st_mode):
        clear(dst)
        os.symlink(os.readlink(src), dst)
        set_meta(dst, st, is_link=True)
    elif stat.S_ISREG(st.st_mode):
        clear(dst)
        shutil.copyfile(src, dst, follow_symlinks=False)
        set_meta(dst, st)
    else:
        return
    copied += 1


def copy_tree(src_dir, rel_dir, dst_dir):
    """The contents of `src_dir` into `dst_dir`; dirs after their contents (their times stick)."""
    for name in sorted(os.listdir(src_dir)):
        src = os.path.join(src_dir, name)
        rel = f"{rel_dir}/{name}" if rel_dir else name
        dst = os.path.join(dst_dir, name)
        is_dir = os.path.isdir(src) and not os.path.islink(src)
        if is_dir:
            if kept(rel) or rel in holding:
                make_parents(dst)
                if not os.path.isdir(dst):
                    clear(dst)
                    os.mkdir(dst)
                copy_tree(src, rel, dst)
                if kept(rel):
                    set_meta(dst, os.lstat(src))
        elif kept(rel):
            copy_entry(src, dst)


def matches(source):
    source = source.strip("/") or "."
    if any(c in source for c in "*?["):
        found = sorted(glob.glob(source, root_dir=root))
    else:
        found = [source] if os.path.lexists(os.path.join(root, source)) else []
    if not found:
        raise SystemExit(f"COPY failed: no source files match {source!r}")
    return found, any(c in source for c in "*?[")


dest = req["dest"]
plan = [matches(s) for s in req["sources"]]
multi = len(req["sources"]) > 1 or any(g for _, g in plan) or dest.endswith("/")
for found, _ in plan:
    for rel in found:
        src = os.path.normpath(os.path.join(root, rel))
        if os.path.isdir(src):
            os.makedirs(dest, exist_ok=True)
            copy_tree(src, "" if rel == "." else rel, dest)
        elif req.get("extract") and tarfile.is_tarfile(src):
            os.makedirs(dest, exist_ok=True)
            with tarfile.open(src) as tar:
                tar.extractall(dest, numeric_owner=True)
            copied += 1
        elif kept(rel):
            into_dir = multi or os.path.isdir(dest)
            copy_entry(src, os.path.join(dest, os.path.basename(rel)) if into_dir else dest.rstrip("/"))
print(f"copied {copied} entries to {dest}")
