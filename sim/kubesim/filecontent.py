"""`FileContent`: one file of a volume's payload as the kubelet writes it (atomic_writer.go's
FileProjection), shared by the volume manager that computes payloads and the process runtime that
writes them to disk."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileContent:
    data: bytes
    mode: int
    fs_user: int | None = None
    """Owner the kubelet gives the file (a projected token when every container runs as this
    uid)."""
