"""Allocation sites: where in the user's code a block or an allocation was made.

A snapshot records each allocation's stack, C++ frames first. Its *site* is the first Python
frame in user code: a ``.py`` file outside PyTorch (``/torch/``) and installed packages
(``site-packages``, ``dist-packages``), written ``model.py:430 forward``; ``<no python frame>``
when the stack has none (an allocation made by the autograd engine's C++ thread, say). The same
frame dicts and stacks are shared across a snapshot's records, so each is classified once.
"""

from __future__ import annotations

NO_SITE = "<no python frame>"
_LIBRARY = ("/torch/", "site-packages", "dist-packages", "<frozen ")


class Sites:
    """The site of each stack, computed once per stack object and once per frame object."""

    def __init__(self):
        self._stacks: dict[int, str] = {}
        self._frames: dict[int, str | None] = {}
        self._keep: list = []  # the objects whose id() is a key: alive while they are

    def site(self, frames) -> str:
        key = id(frames)
        found = self._stacks.get(key)
        if found is None:
            found = self._stacks[key] = self._first_user_frame(frames)
            self._keep.append(frames)
        return found

    def _first_user_frame(self, frames) -> str:
        if not isinstance(frames, list):
            return NO_SITE
        for frame in frames:
            key = id(frame)
            if key not in self._frames:
                self._frames[key] = user_frame(frame)
                self._keep.append(frame)
            if self._frames[key] is not None:
                return self._frames[key]
        return NO_SITE


def user_frame(frame) -> str | None:
    """``file.py:line function`` for a frame of user code, else None."""
    if not isinstance(frame, dict):
        return None
    filename = frame.get("filename")
    if not isinstance(filename, str) or not filename.endswith(".py"):
        return None
    if any(part in filename for part in _LIBRARY):
        return None
    return f"{filename.rsplit('/', 1)[-1]}:{_plain(frame.get('line'))} {_plain(frame.get('name'))}"


def stack_text(frames) -> str:
    """The whole stack, innermost first, one ``file:line function`` per line (C++ frames too)."""
    if not isinstance(frames, list):
        return ""
    lines = []
    for f in frames:
        if isinstance(f, dict):
            lines.append(
                f"{_plain(f.get('filename'))}:{_plain(f.get('line'))} {_plain(f.get('name'))}"
            )
    return "\n".join(lines)


def _plain(value) -> str:
    """A frame field as text: only text and numbers are shown (a list holding itself is not)."""
    return str(value) if isinstance(value, (str, int, float)) else "?"
