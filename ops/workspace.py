"""Layout of an operator's device scratch memory (``Op.cuda_workspaces``): the regions side by
side, each aligned. A leaf module: the registry (``Op.workspace``), the launch descriptors and
the CUDA backend all need it, and it needs none of them."""
from __future__ import annotations

WORKSPACE_ALIGNMENT = 256


def workspace_offsets(sizes) -> list[int]:
    """Byte offset of each scratch region, each starting on a WORKSPACE_ALIGNMENT boundary."""
    out, at = [], 0
    for s in sizes:
        out.append(at)
        at += -(-int(s) // WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT
    return out


def workspace_bytes(sizes) -> int:
    """Bytes of all the regions together, the last one's end rounded up to the alignment."""
    sizes = list(sizes)
    return workspace_offsets(sizes + [0])[-1] if sizes else 0
