"""Stand-in container images for the process runtime.

There is no image store and no Docker here: an image is a directory overlaid on the machine's own
filesystem (none: the host's filesystem alone), plus what an image's config carries (entrypoint,
cmd, env, working directory) and its `/etc/passwd` / `/etc/group` lines, which replace the host's
lines for the same uid / gid inside the container. Tests and `mpi-operator sim --images FILE` say
which image name maps to which stand-in; a name with no stand-in runs on the bare host filesystem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class ImageSpec:
    """One stand-in image. `root` is overlaid on `/` (read-only lower layer above the host's)."""

    root: Path | None = None
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str = ""
    passwd: tuple[str, ...] = ()
    """Whole `/etc/passwd` lines (`name:x:uid:gid:gecos:home:shell`); each replaces the host's line
    of the same uid."""
    group: tuple[str, ...] = ()
    """Whole `/etc/group` lines (`name:x:gid:members`); each replaces the host line of its gid."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base: Path | None = None) -> ImageSpec:
        """From the YAML/JSON form (`root`, `entrypoint`, `cmd`, `env` as a mapping, `workingDir`,
        `passwd`, `group`); a relative `root` is taken relative to `base`."""
        root = data.get("root")
        root_path = None if root in (None, "") else Path(str(root))
        if root_path is not None and not root_path.is_absolute() and base is not None:
            root_path = base / root_path
        env = data.get("env") or {}
        if not isinstance(env, Mapping):
            raise ValueError("image env must be a mapping of name to value")
        return cls(
            root=root_path,
            entrypoint=_strings(data.get("entrypoint"), "entrypoint"),
            cmd=_strings(data.get("cmd"), "cmd"),
            env=tuple((str(k), str(v)) for k, v in env.items()),
            working_dir=str(data.get("workingDir") or ""),
            passwd=_strings(data.get("passwd"), "passwd"),
            group=_strings(data.get("group"), "group"),
        )


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"image {what} must be a list of strings")
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class ImageCatalog:
    """Image reference -> stand-in. Lookups ignore a `docker.io/` or `docker.io/library/` prefix."""

    images: Mapping[str, ImageSpec] = field(default_factory=dict)

    def get(self, reference: str) -> ImageSpec:
        for name in _candidates(reference):
            found = self.images.get(name)
            if found is not None:
                return found
        return ImageSpec()

    def merged(self, other: ImageCatalog) -> ImageCatalog:
        return ImageCatalog({**self.images, **other.images})

    @classmethod
    def load(cls, path: str | Path) -> ImageCatalog:
        """Reads `{images: {reference: {...ImageSpec.from_dict...}}}` from a YAML file."""
        path = Path(path)
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"{path}: {exc}") from exc
        images = doc.get("images") if isinstance(doc, Mapping) else None
        if not isinstance(images, Mapping):
            raise ValueError(f"{path}: expected a mapping under 'images'")
        catalog: dict[str, ImageSpec] = {}
        for reference, spec in images.items():
            try:
                catalog[str(reference)] = ImageSpec.from_dict(spec or {}, base=path.parent)
            except (ValueError, AttributeError) as exc:
                raise ValueError(f"{path}: images[{reference!r}]: {exc}") from exc
        return cls(catalog)


def _candidates(reference: str) -> list[str]:
    names = [reference]
    for prefix in ("docker.io/library/", "docker.io/"):
        if reference.startswith(prefix):
            names.append(reference[len(prefix) :])
    return names
