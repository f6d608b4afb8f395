"""The claim catalogue: every claim raychaos verifies, loaded from ``fixtures/claims.toml``.

One :class:`Claim` per id: its family, the fault, the outcome Ray documents, where Ray says so
and which releases it applies to. :func:`load_catalogue` reads and validates the shipped file
once per process; reports list every claim of it, the selection hooks
(:mod:`chaos.plugin.selection`) refuse marker ids it does not know. The families (feature,
docs page, severity) are in the same file, one ``[[family]]`` table each: a new family is
the catalogue's business alone.

A team adds its own claims (:func:`use_team_file`): a file of the same form in its repository,
its families under prefixes of its own, merged after ours. The plugin copies it into the
results directory (:data:`RESULTS_COPY`), so ``coverage``, ``compare`` and ``report`` read a
run's claims without being told where the file was.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import tomllib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from chaos.errors import ChaosError

FILE = "claims.toml"
#: Where a team's catalogue is found when no option names it.
TEAM_ENV = "RAYCHAOS_CLAIMS_FILE"
#: The team catalogue's copy in a results directory, written by the plugin at session finish.
RESULTS_COPY = "raychaos-claims.toml"
ID = re.compile(r"^([A-Z]+)-(\d{2})$")
VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_REQUIRED = ("id", "family", "fault", "outcome", "doc", "source")
_OPTIONAL = ("since", "scope")
FAMILY_ID = re.compile(r"^[A-Z]+$")
_FAMILY_FIELDS = ("id", "feature", "doc", "severity")
#: Allure's severities, worst first: a test's severity is the worst of its claims' families.
SEVERITIES = ("blocker", "critical", "normal", "minor", "trivial")


@dataclass(frozen=True)
class Family:
    """A group of claims: how Allure and the reports show it."""

    id: str
    feature: str
    #: Ray's docs page for the family.
    doc: str
    #: Allure severity by blast radius: the cluster, a node, or one task/actor/object.
    severity: str


@dataclass(frozen=True)
class Claim:
    """One documented behaviour and the fault that tests it."""

    id: str
    #: The id's prefix, the id of its :class:`Family`.
    family: str
    fault: str
    #: What Ray documents should happen, as the experiments assert it.
    outcome: str
    #: The page of Ray's docs that states it.
    doc: str
    #: "Ray docs: <page>", "Ray source: <file>:<function>" or "raychaos postcondition".
    source: str
    #: The oldest Ray release the claim applies to ("" = every supported release).
    since: str = ""
    #: How the expected outcome varies by release, in a sentence ("" = it does not).
    scope: str = ""
    #: The family's name as Allure shows it (Tasks, Objects, …), from its [[family]] table.
    feature: str = ""

    @property
    def scope_text(self) -> str:
        """One line: ``since 2.59.0``, the scope note, both, or ``all releases``."""
        parts = [f"since {self.since}"] if self.since else []
        if self.scope:
            parts.append(self.scope)
        return "; ".join(parts) or "all releases"

    def to_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "family": self.family,
            "feature": self.feature,
            "fault": self.fault,
            "outcome": self.outcome,
            "doc": self.doc,
            "source": self.source,
            "since": self.since,
            "scope": self.scope,
        }


@dataclass(frozen=True)
class Catalogue:
    """The claims in file order (family by family)."""

    claims: tuple[Claim, ...]
    #: Where it was read from, for error messages.
    origin: str = FILE
    #: The families, by id, in file order.
    families: Mapping[str, Family] = dataclasses.field(default_factory=dict)

    def __iter__(self) -> Iterator[Claim]:
        return iter(self.claims)

    def __len__(self) -> int:
        return len(self.claims)

    def __contains__(self, claim_id: object) -> bool:
        return claim_id in self._by_id

    @functools.cached_property
    def _by_id(self) -> dict[str, Claim]:
        return {c.id: c for c in self.claims}

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.claims)

    def get(self, claim_id: str) -> Claim:
        try:
            return self._by_id[claim_id]
        except KeyError:
            raise KeyError(self.unknown_message(claim_id)) from None

    def matching(self, pattern: str) -> list[str]:
        """Ids matching ``pattern``: an id or an fnmatch pattern (``OBJ-*``), any case."""
        wanted = pattern.strip().upper()
        return [i for i in self.ids if fnmatchcase(i, wanted)]

    def select(self, patterns: Iterable[str]) -> list[str]:
        """Ids matching any of ``patterns``, in catalogue order.

        Raises :class:`ChaosError` naming every pattern that matches no claim.
        """
        patterns = [p for p in patterns if p.strip()]
        unmatched = [p for p in patterns if not self.matching(p)]
        if unmatched:
            raise ChaosError(
                "; ".join(self.unknown_message(p, what="pattern") for p in unmatched),
                hint="`raychaos claims` lists every claim id",
            )
        chosen = {i for p in patterns for i in self.matching(p)}
        return [i for i in self.ids if i in chosen]

    def nearest(self, claim_id: str, n: int = 3) -> list[str]:
        """Known ids closest to ``claim_id`` (same family first), for "did you mean"."""
        wanted = claim_id.strip().upper()
        scored = [(difflib.SequenceMatcher(None, wanted, i).ratio(), i) for i in self.ids]
        # Best first; ties in catalogue order (TASK-01 before TASK-05).
        close = [i for r, i in sorted(scored, key=lambda x: -x[0]) if r >= 0.6][:n]
        prefix = wanted.split("-", 1)[0].rstrip("*?[")
        same = [i for i in self.ids if prefix and i.startswith(prefix + "-")]
        return list(dict.fromkeys([*close, *same]))[:n]

    def unknown_message(self, claim_id: str, what: str = "claim id") -> str:
        near = self.nearest(claim_id)
        tail = (
            f"nearest: {', '.join(near)}"
            if near
            else f"families: {', '.join(dict.fromkeys(c.family for c in self.claims))}"
        )
        verb = "matches no claim" if what == "pattern" else "is not in the claim catalogue"
        return f"{what} {claim_id!r} {verb} ({tail})"


def _family(entry: Any, where: str) -> Family:
    if not isinstance(entry, Mapping):
        raise ChaosError(f"{where}: expected a table of family fields, got {entry!r}")
    extra = sorted(set(entry) - set(_FAMILY_FIELDS))
    missing = [k for k in _FAMILY_FIELDS if not str(entry.get(k, "")).strip()]
    if extra or missing:
        raise ChaosError(
            f"{where}: expected the fields {', '.join(_FAMILY_FIELDS)}"
            + (f"; unknown: {', '.join(extra)}" if extra else "")
            + (f"; missing: {', '.join(missing)}" if missing else "")
        )
    fam = Family(**{k: str(entry[k]).strip() for k in _FAMILY_FIELDS})
    if not FAMILY_ID.match(fam.id):
        raise ChaosError(f"{where}: id {fam.id!r} is not upper-case letters (such as TASK)")
    if fam.severity not in SEVERITIES:
        raise ChaosError(
            f"{where} ({fam.id}): severity {fam.severity!r} is not one of {', '.join(SEVERITIES)}"
        )
    if not fam.doc.startswith("https://"):
        raise ChaosError(f"{where} ({fam.id}): doc {fam.doc!r} is not an https:// link")
    return fam


def _claim(entry: Any, where: str, families: Mapping[str, Family]) -> Claim:
    if not isinstance(entry, Mapping):
        raise ChaosError(f"{where}: expected a table of claim fields, got {entry!r}")
    extra = sorted(set(entry) - {*_REQUIRED, *_OPTIONAL})
    if extra:
        raise ChaosError(f"{where}: unknown field(s) {', '.join(extra)}")
    values: dict[str, str] = {}
    for key in (*_REQUIRED, *_OPTIONAL):
        value = entry.get(key, "")
        if not isinstance(value, str):
            raise ChaosError(f"{where}: {key} must be a string, got {value!r}")
        if key in _REQUIRED and not value.strip():
            raise ChaosError(f"{where}: {key} is required")
        values[key] = value.strip()
    claim = Claim(**values)
    if claim.family in families:
        claim = dataclasses.replace(claim, feature=families[claim.family].feature)
    match = ID.match(claim.id)
    if match is None:
        raise ChaosError(f"{where}: id {claim.id!r} is not FAMILY-NN (such as TASK-01)")
    if claim.family not in families:
        raise ChaosError(
            f"{where} ({claim.id}): family {claim.family!r} is unknown "
            f"(known: {', '.join(families)})",
            hint="add a [[family]] table for it",
        )
    if match.group(1) != claim.family:
        raise ChaosError(
            f"{where} ({claim.id}): the id's prefix is not its family {claim.family!r}"
        )
    if claim.since and not VERSION.match(claim.since):
        raise ChaosError(
            f"{where} ({claim.id}): since {claim.since!r} is not a release such as 2.59.0"
        )
    if not claim.doc.startswith("https://"):
        raise ChaosError(f"{where} ({claim.id}): doc {claim.doc!r} is not an https:// link")
    return claim


def parse_catalogue(text: str, origin: str = FILE) -> Catalogue:
    """Validate the TOML text of a catalogue; raise :class:`ChaosError` naming the entry."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ChaosError(f"{origin} is not valid TOML: {exc}") from None
    extra = sorted(set(data) - {"claim", "family"})
    if extra:
        raise ChaosError(f"{origin}: unexpected top-level key(s) {', '.join(extra)}")
    tables = data.get("family", [])
    if not isinstance(tables, list) or not tables:
        raise ChaosError(f"{origin}: expected [[family]] tables, found none")
    families: dict[str, Family] = {}
    for n, table in enumerate(tables, 1):
        fam = _family(table, f"{origin} family #{n}")
        if fam.id in families:
            raise ChaosError(f"{origin}: family {fam.id} listed twice")
        families[fam.id] = fam
    entries = data.get("claim", [])
    if not isinstance(entries, list) or not entries:
        raise ChaosError(f"{origin}: expected [[claim]] tables, found none")
    claims = tuple(_claim(e, f"{origin} claim #{n}", families) for n, e in enumerate(entries, 1))
    counts = Counter(c.id for c in claims)
    twice = sorted(i for i, n in counts.items() if n > 1)
    if twice:
        raise ChaosError(f"{origin}: claim id(s) listed twice: {', '.join(twice)}")
    empty = [f for f in families if not any(c.family == f for c in claims)]
    if empty:
        raise ChaosError(f"{origin}: family without claims: {', '.join(empty)}")
    return Catalogue(claims, origin, families)


#: The team catalogue in effect in this process (:func:`use_team_file`).
_team: Path | None = None


def load_catalogue(path: Path | None = None, team: Path | None = None) -> Catalogue:
    """The shipped catalogue (or the one at ``path``) with the claims of the team file in
    effect (``team``, else :func:`use_team_file`'s), read and validated once per process."""
    return _load(path, team if team is not None else _team)


def use_team_file(path: Path | None) -> Catalogue:
    """From now on :func:`load_catalogue` includes the team's claims at ``path`` (None: ours
    only). Validated first: a malformed file or a family of ours raises :class:`ChaosError`
    and nothing changes."""
    global _team
    merged = _load(None, path)
    _team = path
    return merged


def team_file() -> Path | None:
    """The team catalogue in effect, if any."""
    return _team


def merge(ours: Catalogue, team: Catalogue) -> Catalogue:
    """``team``'s families and claims after ours; a family id of ours in ``team`` is a clash."""
    clash = [f for f in team.families if f in ours.families]
    if clash:
        raise ChaosError(
            f"{team.origin}: family {', '.join(clash)} is one of raychaos' own "
            f"({', '.join(ours.families)}); a team's claims need a prefix of their own",
            hint="rename the [[family]] id and its claims' ids (e.g. ACME, ACME-01)",
        )
    return Catalogue(
        (*ours.claims, *team.claims),
        f"{ours.origin} + {team.origin}",
        {**ours.families, **team.families},
    )


@functools.cache
def _load(path: Path | None, team: Path | None) -> Catalogue:
    if path is None:
        from chaos.resources import fixtures_path

        path = fixtures_path(FILE)
    shipped = f"reinstall raychaos ({FILE} ships in chaos/fixtures)"
    ours = parse_catalogue(_read(path, shipped), str(path))
    if team is None:
        return ours
    hint = f"point --raychaos-claims-file (or {TEAM_ENV}) at your claims file"
    return merge(ours, parse_catalogue(_read(team, hint), str(team)))


def _read(path: Path, hint: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ChaosError(
            f"cannot read the claim catalogue {path}: {exc.strerror}", hint=hint
        ) from exc
