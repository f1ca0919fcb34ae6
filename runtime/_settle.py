"""What the template settles once, for every child it will fork: the isolation level, the
view of the file system, and (on a root host) every step a child would otherwise repeat.

Two ways, by what the host allows:

- **Prepared** (a root host that can make a read-only view): the template makes its own
  mount and IPC namespaces (the host's file system read-only but the runs' directories,
  the cgroup tree hidden, a /proc that shows each uid only its own processes), at the
  namespaces level an empty network namespace, then gives up for its children what every
  child would: supplementary groups, the host's keyring, ``no_new_privs``, the capability
  bounding set, and last it loads the seccomp filter itself. A child is then one process,
  forked already contained: it joins its cgroups, takes its run's uid (its own, so no two
  runs share a uid's quotas or can signal, trace or re-prioritise each other), applies
  Landlock to its directory and waits for its program.
- **Per child** (no root, or no view): each child contains itself after the fork, in new
  namespaces where the kernel allows (a user namespace first), as ``runtime._child`` says.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from runtime._child import ChildSetup
from runtime._contain import (
    enter_namespaces,
    hide_cgroups,
    interpreter_paths,
    keep_writable,
    make_mounts_private,
    make_root_read_only,
    mount_proc,
    reveal_paths,
    unshare_mounts_and_ipc,
    unshare_network,
)
from runtime._privileges import drop_bounding_set, join_new_session_keyring, load_seccomp
from runtime._seccomp import build_filter
from runtime._wire import TemplateConfig

__all__ = ("settle",)

_PR_SET_NO_NEW_PRIVS = 38


def _in_throwaway_child(body: Any) -> str | None:
    """Run ``body()`` in a forked child: None if it exited 0, else why not."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            body()
        except BaseException as exc:
            os.write(w, str(exc).encode()[:500])
            os._exit(1)
        os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as f:
        reason = f.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return None
    return reason or f"the probe exited with status {code}"


def _in_grandchild(body: Any) -> None:
    """Fork, run ``body()`` in the child; exit as it did (raise with its message if not 0)."""
    r, w = os.pipe()
    inner = os.fork()
    if inner == 0:
        os.close(r)
        try:
            body()
        except BaseException as exc:
            os.write(w, str(exc).encode()[:500])
            os._exit(1)
        os._exit(0)
    os.close(w)
    _, status = os.waitpid(inner, 0)
    with os.fdopen(r, "rb") as f:
        reason = f.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError(reason or f"status {os.waitstatus_to_exitcode(status)}")


def _probe_namespaces() -> str | None:
    """Try the per-child namespaces level (a user namespace first) as a child would enter
    it; None if it works, else why not."""

    def body() -> None:
        ctypes.CDLL(None).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        enter_namespaces()

        def inner() -> None:
            make_mounts_private()
            make_root_read_only()
            hide_cgroups()
            mount_proc()

        _in_grandchild(inner)

    return _in_throwaway_child(body)


def _make_view(uid: int | None, workdir_root: str) -> str:
    """On a root host: a mount and IPC namespace of the template's own, inherited by every
    child: read-only but ``workdir_root``, the host's cgroup tree hidden, a /proc where each
    uid sees only its own processes, and the interpreter reachable for ``uid``. Returns why
    not ("" when done)."""
    try:
        unshare_mounts_and_ipc()
        make_root_read_only()
        if workdir_root:
            keep_writable(workdir_root)
        hide_cgroups()
        mount_proc(hide_others=True)
        if uid is not None:
            reveal_paths(interpreter_paths(), uid, uid)
    except OSError as exc:
        return str(exc)
    return ""


def _give_up(seccomp: bytes) -> None:
    """What every child would give up, given up once here (children inherit it all): no
    supplementary groups, an empty session keyring, ``no_new_privs``, no capability to gain
    by exec, and the seccomp filter (last: it denies what came before)."""
    os.setgroups([])
    join_new_session_keyring()
    ctypes.CDLL(None).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    drop_bounding_set()
    load_seccomp(seccomp)


def _settle_prepared(config: TemplateConfig, uids: list[int]) -> tuple[ChildSetup, dict[str, Any]]:
    isolation, why_not = "process", ""
    if config.isolation in ("namespaces", "auto"):
        try:
            unshare_network()
            isolation = "namespaces"
        except OSError as exc:
            why_not = f"cannot make a network namespace: {exc}"
    seccomp, why_not_seccomp = build_filter(deny_ipc=True, network=config.network)
    setup = ChildSetup(isolation=isolation, seccomp=b"", prepared=True, per_run_uid=bool(uids))
    _give_up(seccomp)
    facts = {
        "isolation": isolation,
        "why_not_namespaces": why_not,
        "seccomp": bool(seccomp),
        "why_not_seccomp": why_not_seccomp,
        "read_only_root": True,
        "why_not_read_only_root": "",
        "uid": uids[0] if uids else None,
        "uids": [min(uids), max(uids)] if uids else None,
        "processes_per_run": 1,
        "shared_network": isolation == "namespaces",
        "network": config.network,
        "hidden_processes": True,
    }
    return setup, facts


def settle(config: TemplateConfig) -> tuple[ChildSetup, dict[str, Any]]:
    """What every child gets here, and the facts the host reports."""
    root = os.geteuid() == 0
    uids = [u for u in config.run_uids if u != 0] if root else []
    if root:
        why_not_view = _make_view(uids[0] if uids else None, config.workdir_root)
        if not why_not_view:
            return _settle_prepared(config, uids)
    else:
        why_not_view = "the host is not root"
    isolation, why_not = "process", ""
    if config.isolation in ("namespaces", "auto"):
        problem = _probe_namespaces()
        if problem is None:
            isolation = "namespaces"
        else:
            why_not = problem
    seccomp, why_not_seccomp = build_filter(deny_ipc=isolation == "process", network=config.network)
    setup = ChildSetup(isolation=isolation, seccomp=seccomp)
    facts = {
        "isolation": isolation,
        "why_not_namespaces": why_not,
        "seccomp": bool(seccomp),
        "why_not_seccomp": why_not_seccomp,
        "read_only_root": isolation == "namespaces",
        "why_not_read_only_root": "" if isolation == "namespaces" else why_not_view,
        "uid": None,
        "uids": None,
        "processes_per_run": 3 if isolation == "namespaces" else 1,
        "shared_network": False,
        "network": config.network,
        "hidden_processes": isolation == "namespaces",
    }
    return setup, facts
