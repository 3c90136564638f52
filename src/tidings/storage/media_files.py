"""Where the media library's files live (CMP-6): a directory (`media.directory`). A file is
written to a temporary name in that directory and renamed into place only when complete, so a
reader never sees half a file and a failed upload leaves nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from pathlib import Path

from tidings.domain.media import STORED_NAME

TEMPORARY_PREFIX = ".incoming-"


class LocalMediaStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path_of(self, name: str) -> Path | None:
        """The file `name` names, if it is a stored name and the file exists."""
        if not STORED_NAME.fullmatch(name):
            return None
        path = self.directory / name
        return path if path.is_file() else None

    async def put(self, name: str, data: bytes) -> None:
        """Store `data` as `name` (a content hash: an existing file already holds it)."""
        if not STORED_NAME.fullmatch(name):
            raise ValueError(f"not a stored media name: {name!r}")
        await asyncio.to_thread(self._write, name, data)

    def _write(self, name: str, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / name
        if target.is_file():
            return
        handle, temporary = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, dir=self.directory)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, 0o644)  # served to anyone: no secret in a public image
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    async def delete(self, name: str) -> None:
        path = self.path_of(name)
        if path is not None:
            await asyncio.to_thread(path.unlink, missing_ok=True)

    def names(self) -> list[str]:
        """Every stored file's name (tests and backups; temporary files are not names)."""
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if STORED_NAME.fullmatch(p.name))
