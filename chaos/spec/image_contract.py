"""What a node image must contain, and what a probe of one found (docs/images.md).

A team's own image is run as it is: raychaos adds only its node entry and wrappers (see
:mod:`chaos.backends.docker.images.derived`). What Ray needs is the image's business; what the
harness needs is written here once — the tools every node needs, and the tools each kind of
fault execs — so a missing tool disables exactly the experiments that exec it, with a reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from chaos.errors import ImageBuildError

#: Without these no node boots or no check runs: a missing one makes the image unusable.
REQUIRED_TOOLS: Mapping[str, str] = MappingProxyType(
    {
        "sh": "the node entry and every shell step",
        "timeout": "bounds every command raychaos runs in a node (coreutils)",
        "cat": "reads the node's state files (coreutils)",
        "stat": "file and file-system checks (coreutils)",
        "df": "disk checks of the object store and spill experiments (coreutils)",
    }
)
#: Tools only some faults exec: a missing one skips the experiments marked as needing it.
FAULT_TOOLS: Mapping[str, str] = MappingProxyType(
    {
        "ps": "finding Ray's processes to kill: raylet, gcs_server, workers (Debian: procps)",
        "kill": "killing one Ray process by PID (Debian: procps)",
        "iptables": "network partitions and firewall drops (Debian: iptables)",
        "ss": "checking that a partition took effect (Debian: iproute2)",
        "tc": "degrading a link with netem (Debian: iproute2)",
        "fallocate": "filling a disk (Debian: util-linux)",
    }
)
#: The pytest marker naming the fault tools an experiment execs.
MARKER = "needs_tools"
#: Python modules only some experiments import inside the nodes: the probe tries each with the
#: image's own Python; a module that fails to import skips the experiments marked as needing it.
MODULES: Mapping[str, str] = MappingProxyType(
    {
        "ray.serve": "Ray Serve (the SERVE family): install ray[serve]==<the image's Ray> "
        "(fastapi, starlette, uvicorn, watchfiles, requests)",
    }
)
#: The pytest marker naming the modules an experiment imports in its nodes.
MODULES_MARKER = "needs_modules"


@dataclass(frozen=True)
class ImageProbe:
    """What the probe found in an image (``/raychaos/probe.json`` of the derived image)."""

    #: The image as given (a team's reference) and the node image derived from it.
    image: str
    node_image: str
    ray: str
    python: str
    ray_version: str
    python_version: str
    #: ``venv``, ``conda`` or ``prefix`` (a system or standalone prefix).
    prefix_kind: str
    #: tool → its path in the image ("" when absent).
    tools: Mapping[str, str] = field(default_factory=dict)
    #: module of :data:`MODULES` → "" when it imports, else its import error (one line). A
    #: module the probe did not try (an older probe) is taken as importable.
    modules: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", MappingProxyType(dict(self.tools)))
        object.__setattr__(self, "modules", MappingProxyType(dict(self.modules)))

    @classmethod
    def from_json(cls, image: str, node_image: str, data: Mapping[str, Any]) -> ImageProbe:
        try:
            return cls(
                image=image,
                node_image=node_image,
                ray=str(data["ray"]),
                python=str(data["python"]),
                ray_version=str(data["ray_version"]),
                python_version=str(data["python_version"]),
                prefix_kind=str(data.get("prefix_kind", "prefix")),
                tools={str(k): str(v) for k, v in dict(data["tools"]).items()},
                modules={str(k): str(v) for k, v in dict(data.get("modules", {})).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ImageBuildError(
                f"the probe of {image} wrote an unreadable report ({exc!r})",
                hint="rebuild it: `docker rmi` the derived image named in the log and run again",
            ) from None

    def has(self, tool: str) -> bool:
        return bool(self.tools.get(tool))

    def import_error(self, module: str) -> str:
        """Why ``module`` does not import in the image ("" when it does, or was not tried)."""
        return self.modules.get(module, "")

    @property
    def missing_modules(self) -> list[str]:
        return [module for module in MODULES if self.import_error(module)]

    @property
    def missing_required(self) -> list[str]:
        return [tool for tool in REQUIRED_TOOLS if not self.has(tool)]

    @property
    def missing_fault_tools(self) -> list[str]:
        return [tool for tool in FAULT_TOOLS if not self.has(tool)]

    def describe(self) -> str:
        """One line: what runs Ray in this image."""
        return (
            f"{self.image}: Ray {self.ray_version} on Python {self.python_version} "
            f"({self.prefix_kind} {self.python}), node image {self.node_image}"
        )

    def require_bootable(self) -> None:
        """Raise one line naming every required tool the image lacks."""
        missing = self.missing_required
        if missing:
            raise ImageBuildError(
                f"{self.image} lacks {', '.join(missing)}, which every raychaos node needs ("
                + "; ".join(f"{t}: {REQUIRED_TOOLS[t]}" for t in missing)
                + ")",
                hint="install them in the image (Debian: coreutils), see the image contract "
                "in raychaos's docs/images.md",
            )


def skip_reason(probe: ImageProbe, needed: tuple[str, ...]) -> str | None:
    """Why an experiment that execs ``needed`` cannot run on ``probe``'s image (None: it can)."""
    missing = [tool for tool in needed if not probe.has(tool)]
    if not missing:
        return None
    uses = "; ".join(f"{t}: {FAULT_TOOLS.get(t, 'used by this experiment')}" for t in missing)
    return f"image {probe.image} has no {', '.join(missing)}, which this experiment needs ({uses})"


def module_skip_reason(probe: ImageProbe, needed: tuple[str, ...]) -> str | None:
    """Why an experiment importing ``needed`` in its nodes cannot run on ``probe``'s image."""
    missing = [module for module in needed if probe.import_error(module)]
    if not missing:
        return None
    why = "; ".join(f"{m}: {probe.import_error(m)} ({MODULES.get(m, '')})" for m in missing)
    return f"image {probe.image} cannot import {', '.join(missing)}: {why}"


def needed_modules(marker_args: tuple[object, ...]) -> tuple[str, ...]:
    """The modules of a ``needs_modules`` marker, each checked against the contract."""
    return _checked(MODULES_MARKER, "modules", MODULES, marker_args)


def needed_tools(marker_args: tuple[object, ...]) -> tuple[str, ...]:
    """The tools of a ``needs_tools`` marker, each checked against the contract."""
    return _checked(MARKER, "tools", FAULT_TOOLS, marker_args)


def _checked(
    marker: str, what: str, known: Mapping[str, str], marker_args: tuple[object, ...]
) -> tuple[str, ...]:
    names = tuple(str(a) for a in marker_args)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"@pytest.mark.{marker}: expected {what} among {', '.join(known)}, "
            f"got {', '.join(unknown)}"
        )
    return names
