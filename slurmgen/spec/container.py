"""The spec's `container:` section across its fields: which fields each runtime takes, and what its image can be.

A field of another runtime is an error rather than ignored: `writable: true` under apptainer would silently leave
the image read-only (apptainer's own option is `writable_tmpfs`), and `cleanenv` under pyxis does not exist.
"""

from __future__ import annotations

import re
from typing import Any

from slurmgen.spec.types import Ctx

# Fields only one family of runtimes reads (pyxis and enroot share the enroot options pyxis passes on; singularity
# is Apptainer under its former name, with the same options).
APPTAINER_LIKE = ("apptainer", "singularity")
_ONLY = {
    "name": ("pyxis", "enroot"),
    "workdir": ("pyxis", *APPTAINER_LIKE),
    "mount_home": ("pyxis",),
    "writable": ("pyxis", "enroot"),
    "writable_tmpfs": APPTAINER_LIKE,
    "cleanenv": APPTAINER_LIKE,
    "containall": APPTAINER_LIKE,
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
    gpu = c.get("gpu")
    if runtime in ("pyxis", "enroot") and isinstance(gpu, str) and gpu != "nvidia":
        # enroot's GPU support is its NVIDIA hook (enroot's conf/hooks/98-nvidia.sh, run by pyxis too), driven by
        # the image's NVIDIA_VISIBLE_DEVICES: no option turns ROCm on or the hook off from the command line.
        ctx.fail(
            ("container", "gpu"),
            f"{gpu} is not something {runtime} can give: its GPUs come from enroot's NVIDIA hook, which follows "
            "the image's NVIDIA_VISIBLE_DEVICES; remove gpu, or run the image with runtime: apptainer",
        )
    image = c.get("image")
    if not isinstance(image, str) or image.startswith("${"):
        return  # a path from a variable (`${SCRATCH}/x.sif`) is only known in the batch shell, which expands it
    if runtime in APPTAINER_LIKE and not image.startswith("/") and not _APPTAINER_URI.fullmatch(image):
        ctx.fail(
            ("container", "image"),
            f"{image!r} is neither an absolute path (a .sif file or a sandbox directory, as the nodes see it) nor "
            f"an image URI {runtime} pulls (docker://..., oras://..., library://...)",
        )
    if runtime == "enroot" and not image.startswith("/"):
        ctx.fail(
            ("container", "image"),
            f"{image!r}: enroot create takes a squashfs image file; import it once with `enroot import "
            "docker://...` and give the .sqsh file's absolute path",
        )
