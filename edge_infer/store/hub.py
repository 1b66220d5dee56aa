"""Hugging Face Hub: GGUF repos, their files by quant level, headers by range read.

Everything goes through huggingface_hub (HfApi for the API, hf_hub_url /
get_hf_file_metadata / get_session for files), so HF_ENDPOINT, HF_TOKEN, proxies
and certificates apply as they do for huggingface_hub itself. The endpoint is read
when a client is made (not when huggingface_hub is imported), so tests and users can
point HF_ENDPOINT at a mirror at any time.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from edge_infer.errors import EdgeInferError, ModelFileError
from edge_infer.gguf import quant_types
from edge_infer.store.download import RemoteFile
from edge_infer.gguf.header import GGUFHeader, NeedMoreBytes, parse_header_prefix
from edge_infer.gguf.info import ModelInfo, info_from_header, merge_split_headers

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx

log = logging.getLogger(__name__)
DEFAULT_ENDPOINT = "https://huggingface.co"
FIRST_RANGE = 1 << 20          # most headers fit in 1 MiB; a 262k-token vocabulary takes ~6
MAX_HEADER_BYTES = 256 << 20   # give up on "headers" larger than this


class HubError(EdgeInferError):
    """The hub answered, but not with what was asked for (no such repo, file, revision)."""


class HubUnreachableError(HubError):
    """The hub could not be reached at all (offline, DNS, timeout)."""


def endpoint_from_env() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    sha256: str | None      # LFS sha256; None for files kept in git (not model weights)
    blob_id: str | None = None

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name


@dataclass(frozen=True)
class QuantGroup:
    """One quant level of one model in a repo: one file, or the shards of a split file."""

    quant: str
    stem: str               # file name without quant and split suffix: which model
    files: tuple[HubFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def split(self) -> bool:
        return len(self.files) > 1

    @property
    def first(self) -> HubFile:
        return self.files[0]

    @property
    def bits(self) -> float:
        return quant_types.bits_per_weight(self.quant)

    def matches(self, quant: str) -> bool:
        return quant_types.canonical(quant) == quant_types.canonical(self.quant)


@dataclass(frozen=True)
class RepoListing:
    repo: str
    revision: str           # as asked ("main", a tag, a commit)
    commit: str             # the commit it resolved to: every file is fetched at this commit
    files: tuple[HubFile, ...]

    def gguf_groups(self) -> list[QuantGroup]:
        """GGUF files by quant level, split shards joined, sorted by size (vision
        projectors, `mmproj-*`, are not models and are left out)."""
        shards: dict[tuple[str, str], list[tuple[int, int, HubFile]]] = defaultdict(list)
        for f in self.files:
            if not f.path.lower().endswith(".gguf") or f.name.lower().startswith("mmproj"):
                continue
            quant = quant_types.quant_from_filename(f.name) or "unknown"
            stem = quant_types.model_stem(f.path)
            split = quant_types.split_info(f.name)
            folder = str(PurePosixPath(f.path).parent)
            key = (f"{folder}/{stem}" if folder != "." else stem, quant)
            if split:
                shards[key + (split[0],)].append((split[1], split[2], f))
            else:
                shards[key + (f.path,)].append((1, 1, f))
        groups = []
        for (stem, quant, _), parts in shards.items():
            parts.sort(key=lambda p: p[0])
            count = parts[0][1]
            if len(parts) != count or [p[0] for p in parts] != list(range(1, count + 1)):
                log.warning("%s: %s has %d of %d shards; left out", self.repo, parts[0][2].path, len(parts), count)
                continue
            groups.append(QuantGroup(quant, stem, tuple(p[2] for p in parts)))
        groups.sort(key=lambda g: (g.stem, g.size))
        return groups

    def find(self, quant: str) -> list[QuantGroup]:
        return [g for g in self.gguf_groups() if g.matches(quant)]


@dataclass(frozen=True)
class RepoSummary:
    repo: str
    downloads: int | None
    likes: int | None
    updated: str | None
    tags: tuple[str, ...] = field(default_factory=tuple)


class HubClient:
    def __init__(self, endpoint: str | None = None, token: str | bool | None = None,
                 timeout: float = 10.0):
        from huggingface_hub import HfApi

        self.endpoint = (endpoint or endpoint_from_env()).rstrip("/")
        self.token = token
        self.timeout = timeout
        self.api = HfApi(endpoint=self.endpoint, token=token)
        self.bytes_read = 0   # bytes fetched by header range reads (shown by `quants -v`)

    # -- errors ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, what: str):
        from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, OfflineModeIsEnabled,
                                            RemoteEntryNotFoundError, RepositoryNotFoundError,
                                            RevisionNotFoundError)

        try:
            yield
        except GatedRepoError:
            raise HubError(f"{what} is gated: accept its license on the hub, then set HF_TOKEN "
                           f"(or run `hf auth login`)") from None
        except RepositoryNotFoundError:
            raise HubError(f"{what}: no such repository on {self.endpoint} (a private one needs "
                           f"HF_TOKEN)") from None
        except RevisionNotFoundError:
            raise HubError(f"{what}: no such revision (branch, tag or commit)") from None
        except RemoteEntryNotFoundError:
            raise HubError(f"{what}: no such file in the repository") from None
        except OfflineModeIsEnabled:
            raise HubUnreachableError(f"HF_HUB_OFFLINE is set: not contacting the hub for {what}") from None
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else "?"
            if status in (429, 500, 502, 503, 504):
                raise HubUnreachableError(f"the hub answered HTTP {status} for {what}; try again later") from None
            raise HubError(f"the hub answered HTTP {status} for {what}: {str(exc).splitlines()[0]}") from None
        except (httpx.TransportError, OSError) as exc:
            raise HubUnreachableError(
                f"cannot reach the Hugging Face Hub at {self.endpoint} ({exc.__class__.__name__}: "
                f"{str(exc) or 'no answer'}); check the network, or HF_ENDPOINT for a mirror") from None

    # -- API -------------------------------------------------------------------------

    def probe(self) -> None:
        """Fail fast when the endpoint's host cannot even be connected to (offline, DNS):
        HfApi.list_models retries network errors with backoff for ~25 s, which is right
        for a flaky hub and wrong for no network at all. Skipped behind a proxy."""
        import socket
        from urllib.parse import urlparse

        if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                           "ALL_PROXY", "all_proxy")):
            return
        url = urlparse(self.endpoint)
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            socket.create_connection((url.hostname, port), timeout=min(self.timeout, 5.0)).close()
        except OSError as exc:
            raise HubUnreachableError(
                f"cannot reach the Hugging Face Hub at {self.endpoint} ({exc.__class__.__name__}: "
                f"{exc}); check the network, or HF_ENDPOINT for a mirror") from None

    def search(self, query: str, limit: int = 20) -> list[RepoSummary]:
        """GGUF model repos matching `query`, most downloaded first."""
        self.probe()
        with self._errors(f"searching {query!r}"):
            models = list(self.api.list_models(search=query or None, filter="gguf", sort="downloads",
                                               limit=limit))
        out = []
        for m in models:
            updated = m.last_modified.date().isoformat() if m.last_modified else None
            out.append(RepoSummary(m.id, m.downloads, m.likes, updated, tuple(m.tags or ())))
        return out

    def listing(self, repo: str, revision: str | None = None) -> RepoListing:
        """Every file of `repo` at `revision` with its size and LFS sha256, pinned to a commit."""
        revision = revision or "main"
        with self._errors(f"{repo}@{revision}"):
            info = self.api.model_info(repo, revision=revision, files_metadata=True, timeout=self.timeout)
            files = [HubFile(s.rfilename, int(s.size or 0), s.lfs.sha256 if s.lfs else None, s.blob_id)
                     for s in info.siblings or []]
            commit = info.sha or revision
            if any(f.path.lower().endswith(".gguf") and (not f.size or not f.sha256) for f in files):
                # Older or partial answers lack blob metadata: the tree listing has it.
                files = [HubFile(t.path, int(t.size), t.lfs.sha256 if t.lfs else None, t.blob_id)
                         for t in self.api.list_repo_tree(repo, revision=commit, recursive=True)
                         if hasattr(t, "size")]
        return RepoListing(repo, revision, commit, tuple(files))

    def url(self, repo: str, path: str, revision: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(repo, path, revision=revision, endpoint=self.endpoint)

    def headers(self) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers

        return build_hf_headers(token=self.token)

    def remote_file(self, listing: RepoListing, f: HubFile, *, check: bool = True) -> RemoteFile:
        """What the downloader needs. With check, a HEAD on `resolve` confirms size and
        sha256 (X-Linked-Size, X-Linked-Etag) against the listing."""
        if not f.sha256:
            raise HubError(f"{listing.repo}/{f.path} has no LFS sha256 on the hub; it cannot be verified")
        url = self.url(listing.repo, f.path, listing.commit)
        if check:
            from huggingface_hub import get_hf_file_metadata

            with self._errors(f"{listing.repo}/{f.path}"):
                meta = get_hf_file_metadata(url, token=self.token, timeout=self.timeout,
                                            endpoint=self.endpoint)
            if meta.size is not None and meta.size != f.size:
                raise HubError(f"{listing.repo}/{f.path}: the hub lists {f.size} bytes but serves "
                               f"{meta.size}; try again later")
            if meta.etag and len(meta.etag) == 64 and meta.etag.lower() != f.sha256.lower():
                raise HubError(f"{listing.repo}/{f.path}: the hub's sha256 changed while we looked "
                               f"({f.sha256[:12]}… vs {meta.etag[:12]}…); run the command again")
        return RemoteFile(url=url, size=f.size, sha256=f.sha256.lower(), repo=listing.repo,
                          revision=listing.commit, path=f.path)

    # -- headers by range read -------------------------------------------------------

    def read_header(self, listing: RepoListing, f: HubFile) -> GGUFHeader:
        """The GGUF header of a remote file from HTTP range requests: the first MiB, then
        twice as much until the whole header is in (never the weights)."""
        url = self.url(listing.repo, f.path, listing.commit)
        buf = bytearray()
        want = min(FIRST_RANGE, f.size)
        source = f"{listing.repo}/{f.path}"
        while True:
            with self._errors(source):
                chunk = self._range(url, len(buf), want)
            buf += chunk
            self.bytes_read += len(chunk)
            try:
                return parse_header_prefix(bytes(buf), f.size, source)
            except NeedMoreBytes:
                if len(buf) >= f.size or want >= MAX_HEADER_BYTES or not chunk:
                    raise ModelFileError(f"{source}: no complete GGUF header in its first {len(buf)} bytes") from None
                want = min(f.size, want * 2, MAX_HEADER_BYTES)

    def _range(self, url: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of a file. A server that ignores Range sends the whole file:
        read only as far as needed, then hang up."""
        from huggingface_hub import get_session
        from huggingface_hub.utils import hf_raise_for_status

        headers = {**self.headers(), "Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}
        with get_session().stream("GET", url, headers=headers, timeout=self.timeout,
                                  follow_redirects=True) as resp:
            if resp.status_code >= 400:
                resp.read()
                hf_raise_for_status(resp)
            skip = start if resp.status_code == 200 else 0
            out = bytearray()
            for data in resp.iter_bytes():
                out += data
                if len(out) >= skip + (end - start):
                    break
        return bytes(out[skip:skip + (end - start)])

    def model_info(self, listing: RepoListing, group: QuantGroup) -> ModelInfo:
        """ModelInfo of a remote quant level from its header(s): for a split file every
        shard's header is read (each holds its own tensors), metadata from the first."""
        headers = [self.read_header(listing, f) for f in group.files]
        merged = merge_split_headers(headers)
        return info_from_header(f"{listing.repo}/{group.first.path}", merged)


def scaled_info(info: ModelInfo, weights_bytes: int) -> ModelInfo:
    """The same architecture with another quant level's weight bytes, spread over the
    layers in the same proportions: one header read serves every level of a repo."""
    if info.weights_bytes <= 0:
        return info
    k = weights_bytes / info.weights_bytes
    return replace(info, weights_bytes=weights_bytes,
                   layer_weight_bytes=tuple(int(b * k) for b in info.layer_weight_bytes),
                   input_weight_bytes=int(info.input_weight_bytes * k),
                   output_weight_bytes=int(info.output_weight_bytes * k))


def parse_spec(spec: str) -> tuple[str, str | None, str | None]:
    """"owner/name[:QUANT][@REVISION]" (either order) -> (repo, quant, revision)."""
    repo, quant, revision = spec, None, None
    if "@" in repo:
        repo, _, rest = repo.partition("@")
        revision, _, q = rest.partition(":")
        quant = q or None
    if ":" in repo:
        repo, _, quant = repo.partition(":")
    return repo.strip(), (quant or None), (revision or None)
