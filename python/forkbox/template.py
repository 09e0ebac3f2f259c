"""``Template`` (blocking) and ``AsyncTemplate`` (asyncio): build templates from an image or a
Dockerfile, follow their builds, list, get and delete them. Every method is static and takes where
to connect as keyword arguments, like ``Sandbox.create``."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Union

from . import _core as core
from ._core import BuildContext, OnLog, Op
from ._transport import AsyncTransport, SyncTransport
from .models import TemplateBuild, TemplateInfo, UserTemplate


def _run(op: Op, api_key: Optional[str], url: Optional[str], max_retries: Optional[int]) -> Any:
    t = SyncTransport(api_key, url, max_retries=max_retries)
    try:
        return t.run(op)
    finally:
        t.close()


async def _arun(op: Op, api_key: Optional[str], url: Optional[str], max_retries: Optional[int]) -> Any:
    t = AsyncTransport(api_key, url, max_retries=max_retries)
    try:
        return await t.run(op)
    finally:
        await t.aclose()


class Template:
    """Templates sandboxes are created from: ``Sandbox.create(template=build.template)``."""

    @staticmethod
    def build(
        *,
        name: str,
        image: Optional[str] = None,
        dockerfile: Optional[str] = None,
        context: Optional[BuildContext] = None,
        build_args: Optional[Dict[str, str]] = None,
        resources: Optional[Dict[str, int]] = None,
        description: Optional[str] = None,
        start_cmd: Optional[str] = None,
        ready_cmd: Optional[str] = None,
        registry_auth: Optional[Dict[str, str]] = None,
        archive: Optional[Union[str, "os.PathLike[str]", bytes]] = None,
        on_log: Optional[OnLog] = None,
        api_key: Optional[str] = None,
        url: Optional[str] = None,
        max_retries: Optional[int] = None,
    ) -> TemplateBuild:
        """Builds ``name`` (a new template, or its next version) from ``image`` or ``dockerfile`` (its
        text; with neither, ``context``'s Dockerfile) and waits: returns the ready build, raises
        ``TemplateBuildError`` (the build's code, message and last log lines) when it fails.
        ``context`` is a directory (tarred as it is) or a tar archive's bytes; ``on_log`` gets
        each log line once, in order. ``start_cmd`` runs from bake time on in every sandbox,
        ``ready_cmd`` must pass before the bake; ``registry_auth`` ({username, password}) is
        kept as this key's login to the image's registry. ``archive`` (a path, or the bytes) is an
        image as ``docker save`` writes it or an OCI layout tarball, instead of ``image`` or a Dockerfile."""
        op = core.build_template(name=name, description=description, image=image, dockerfile=dockerfile, context=context, build_args=build_args, resources=resources, on_log=on_log, start_cmd=start_cmd, ready_cmd=ready_cmd, registry_auth=registry_auth, archive=archive)
        return _run(op, api_key, url, max_retries)

    @staticmethod
    def wait_for_build(build_id: str, *, offset: int = 0, on_log: Optional[OnLog] = None, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> TemplateBuild:
        """Follows a build's log from ``offset`` until it ends; returns or raises as ``build`` does."""
        return _run(core.wait_for_build(build_id, offset=offset, on_log=on_log), api_key, url, max_retries)

    @staticmethod
    def get_build(build_id: str, *, logs_offset: int = 0, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> TemplateBuild:
        """A build's status and its log so far (from ``logs_offset``)."""
        return _run(core.get_build(build_id, logs_offset=logs_offset), api_key, url, max_retries)

    @staticmethod
    def list(*, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> List[TemplateInfo]:
        """The built-ins, this key's templates (newest ready version) and public ones."""
        return _run(core.list_templates(), api_key, url, max_retries)

    @staticmethod
    def get(name: str, *, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> UserTemplate:
        return _run(core.get_template(name), api_key, url, max_retries)

    @staticmethod
    def delete(name: str, *, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> None:
        """Deletes every version; sandboxes running from it carry on."""
        _run(core.delete_template(name), api_key, url, max_retries)


class AsyncTemplate:
    """``Template`` for asyncio; ``on_log`` may be a coroutine function."""

    @staticmethod
    async def build(
        *,
        name: str,
        image: Optional[str] = None,
        dockerfile: Optional[str] = None,
        context: Optional[BuildContext] = None,
        build_args: Optional[Dict[str, str]] = None,
        resources: Optional[Dict[str, int]] = None,
        description: Optional[str] = None,
        start_cmd: Optional[str] = None,
        ready_cmd: Optional[str] = None,
        registry_auth: Optional[Dict[str, str]] = None,
        archive: Optional[Union[str, "os.PathLike[str]", bytes]] = None,
        on_log: Optional[OnLog] = None,
        api_key: Optional[str] = None,
        url: Optional[str] = None,
        max_retries: Optional[int] = None,
    ) -> TemplateBuild:
        op = core.build_template(name=name, description=description, image=image, dockerfile=dockerfile, context=context, build_args=build_args, resources=resources, on_log=on_log, start_cmd=start_cmd, ready_cmd=ready_cmd, registry_auth=registry_auth, archive=archive)
        return await _arun(op, api_key, url, max_retries)

    @staticmethod
    async def wait_for_build(build_id: str, *, offset: int = 0, on_log: Optional[OnLog] = None, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> TemplateBuild:
        return await _arun(core.wait_for_build(build_id, offset=offset, on_log=on_log), api_key, url, max_retries)

    @staticmethod
    async def get_build(build_id: str, *, logs_offset: int = 0, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> TemplateBuild:
        return await _arun(core.get_build(build_id, logs_offset=logs_offset), api_key, url, max_retries)

    @staticmethod
    async def list(*, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> List[TemplateInfo]:
        return await _arun(core.list_templates(), api_key, url, max_retries)

    @staticmethod
    async def get(name: str, *, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> UserTemplate:
        return await _arun(core.get_template(name), api_key, url, max_retries)

    @staticmethod
    async def delete(name: str, *, api_key: Optional[str] = None, url: Optional[str] = None, max_retries: Optional[int] = None) -> None:
        await _arun(core.delete_template(name), api_key, url, max_retries)
