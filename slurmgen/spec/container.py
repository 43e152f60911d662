"""The spec's `container:` section across its fields: which fields each runtime takes, and what its image can be.

A field of another runtime is an error rather than ignored: `writable: true` under apptainer would silently leave
the image read-only (apptainer's own option is `writable_tmpfs`), and `cleanenv` under pyxis does not exist.
"""

from __future__ import annotations

import re
from typing import Any

from slurmgen.spec.types import Ctx

# Fields only one family of runtimes reads (pyxis and enroot share the enroot options pyxis passes on).
_ONLY = {
    "name": ("pyxis", "enroot"),
    "workdir": ("pyxis", "apptainer"),
    "mount_home": ("pyxis",),
    "writable": ("pyxis", "enroot"),
    "writable_tmpfs": ("apptainer",),
    "cleanenv": ("apptainer",),
    "containall": ("apptainer",),
}
# apptainer(1) "exec": an image is a SIF file or a sandbox directory (a path) or a URI it pulls from
# (docker://, docker-archive:, oras://, library://, shub://, oci-archive:, oci:).
_APPTAINER_URI = re.compile(r"(docker|oras|library|shub|https?)://\S+|(docker-archive|oci-archive|oci):\S+")


def check_container(c: dict[str, Any], ctx: Ctx) -> None:
    """One error per field the chosen runtime does not take, and for an image it cannot run."""
    runtime = c.get("runtime", "pyxis")
    for key, runtimes in _ONLY.items():
        if key in c and runtime not in runtimes:
            ctx.fail(
                ("container", key),
                f"is an option of {' and '.join(runtimes)}, not of runtime {runtime}; remove it"
                + (" (apptainer's image is read-only: use writable_tmpfs)" if key == "writable" else ""),
            )
    image = c.get("image")
    if not isinstance(image, str):
        return
    if runtime == "apptainer" and not image.startswith("/") and not _APPTAINER_URI.fullmatch(image):
        ctx.fail(
            ("container", "image"),
            f"{image!r} is neither an absolute path (a .sif file or a sandbox directory, as the nodes see it) nor "
            "an image URI apptainer pulls (docker://..., oras://..., library://...)",
        )
    if runtime == "enroot" and not image.startswith("/"):
        ctx.fail(
            ("container", "image"),
            f"{image!r}: enroot create takes a squashfs image file; import it once with `enroot import "
            "docker://...` and give the .sqsh file's absolute path",
        )
