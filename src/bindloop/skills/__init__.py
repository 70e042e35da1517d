"""Skills: progressive disclosure for instructions — a registry of what your source ships, a Tier-1
catalog within a token budget, resolution of active bodies (live or pinned), activation through the
loop's ``activate_skills`` port, load admission, SKILL.md over your own YAML, and the Agent Skills
Discovery index."""

from ._activation import (
    DEFAULT_MAX_ACTIVE_SKILLS as DEFAULT_MAX_ACTIVE_SKILLS,
    DEFAULT_MAX_SKILL_BODY_TOKENS as DEFAULT_MAX_SKILL_BODY_TOKENS,
    ApplyInstructions as ApplyInstructions,
    ResolveActiveInstructions as ResolveActiveInstructions,
    SkillActivation as SkillActivation,
    SkillActivationReport as SkillActivationReport,
    SkillLoadAdmission as SkillLoadAdmission,
    admit_skill_load as admit_skill_load,
    create_skill_activation as create_skill_activation,
    estimate_skill_body_tokens as estimate_skill_body_tokens,
)
from ._catalog import (
    DEFAULT_SKILL_CATALOG_BUDGET as DEFAULT_SKILL_CATALOG_BUDGET,
    CatalogDetail as CatalogDetail,
    CatalogEntry as CatalogEntry,
    SkillCatalog as SkillCatalog,
    SkillCost as SkillCost,
    default_skill_line_cost as default_skill_line_cost,
    partition_skill_catalog as partition_skill_catalog,
)
from ._discovery import (
    AGENT_SKILLS_DISCOVERY_SCHEMA as AGENT_SKILLS_DISCOVERY_SCHEMA,
    ArtifactType as ArtifactType,
    DiscoveryArtifact as DiscoveryArtifact,
    build_agent_skills_discovery_index as build_agent_skills_discovery_index,
)
from ._markdown import (
    ParsedSkillMarkdown as ParsedSkillMarkdown,
    YamlPort as YamlPort,
    parse_skill_markdown as parse_skill_markdown,
    serialize_skill_markdown as serialize_skill_markdown,
)
from ._errors import SkillFormatError as SkillFormatError
from ._model import (
    PLATFORM_PREFIX as PLATFORM_PREFIX,
    ResolvedSkill as ResolvedSkill,
    Sha256Hex as Sha256Hex,
    SkillInstructions as SkillInstructions,
    SkillOrigin as SkillOrigin,
    SkillSpec as SkillSpec,
    SkillSummary as SkillSummary,
    UnresolvedReason as UnresolvedReason,
    UnresolvedSkill as UnresolvedSkill,
    platform_ref as platform_ref,
)
from ._registry import (
    OnWarn as OnWarn,
    SkillRegistry as SkillRegistry,
    create_skill_registry as create_skill_registry,
    skill_name_problem as skill_name_problem,
)
from ._resolve import (
    ExternalSkill as ExternalSkill,
    ExternalSkillSource as ExternalSkillSource,
    resolve_active_skill_instructions as resolve_active_skill_instructions,
)

__all__ = (
    "AGENT_SKILLS_DISCOVERY_SCHEMA",
    "ApplyInstructions",
    "ArtifactType",
    "CatalogDetail",
    "CatalogEntry",
    "DEFAULT_MAX_ACTIVE_SKILLS",
    "DEFAULT_MAX_SKILL_BODY_TOKENS",
    "DEFAULT_SKILL_CATALOG_BUDGET",
    "DiscoveryArtifact",
    "ExternalSkill",
    "ExternalSkillSource",
    "OnWarn",
    "PLATFORM_PREFIX",
    "ParsedSkillMarkdown",
    "ResolveActiveInstructions",
    "ResolvedSkill",
    "Sha256Hex",
    "SkillActivation",
    "SkillActivationReport",
    "SkillCatalog",
    "SkillCost",
    "SkillFormatError",
    "SkillInstructions",
    "SkillLoadAdmission",
    "SkillOrigin",
    "SkillRegistry",
    "SkillSpec",
    "SkillSummary",
    "UnresolvedReason",
    "UnresolvedSkill",
    "YamlPort",
    "admit_skill_load",
    "build_agent_skills_discovery_index",
    "create_skill_activation",
    "create_skill_registry",
    "default_skill_line_cost",
    "estimate_skill_body_tokens",
    "parse_skill_markdown",
    "partition_skill_catalog",
    "platform_ref",
    "resolve_active_skill_instructions",
    "serialize_skill_markdown",
    "skill_name_problem",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
