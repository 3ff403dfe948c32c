"""Settings: one class, every setting declared once with a default and a description.

Values come, highest priority first, from keyword arguments, ``LIBRARIAN_*`` environment variables,
a TOML config file (``LIBRARIAN_CONFIG``, else ``<home>/config.toml`` when it exists) and the
defaults below. ``docs/configuration.md`` is generated from these declarations and a test fails when
a setting has no description.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from librarian.errors import InvalidInputError

DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class Settings(BaseSettings):
    """Everything Librarian can be configured with. Environment prefix: ``LIBRARIAN_``."""

    model_config = SettingsConfigDict(env_prefix="LIBRARIAN_", extra="forbid", validate_default=True)
    # Where :meth:`load` read the file from (tasks must never see it); not a setting itself.
    _config_file: Path | None = PrivateAttr(default=None)

    home: Path = Field(
        default=Path(".librarian"),
        description="Data directory: the SQLite database, the embedded Chroma index and git checkouts.",
    )
    database_url: str | None = Field(
        default=None,
        description=(
            "SQLAlchemy URL of the source of truth. Default: a SQLite file in `home`. "
            "For PostgreSQL use `postgresql+psycopg://user@host:5432/db`."
        ),
    )
    vector_url: str | None = Field(
        default=None,
        description=(
            "Where the derived vector index lives. Default: embedded Chroma in `home/chroma`. "
            "`chroma+http://host:port` for a Chroma server, `pgvector` for pgvector in the database "
            "of `database_url`, or `pgvector+postgresql+psycopg://...` for another PostgreSQL."
        ),
    )
    index_namespace: str = Field(
        default="librarian",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$",
        description=(
            "Prefix of vector collection names, so several deployments can share one Chroma server "
            "or PostgreSQL database."
        ),
    )
    embedding_provider: Literal["local", "openai"] = Field(
        default="local",
        description="`local` runs all-MiniLM-L6-v2 offline; `openai` calls an OpenAI-compatible endpoint.",
    )
    embedding_model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        description="Embedding model name, recorded on every chunk as `embedding_model_version`.",
    )
    embedding_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible embeddings API (e.g. `http://127.0.0.1:8000/v1`).",
    )
    embedding_api_key: SecretStr | None = Field(
        default=None, description="Bearer token for `embedding_url`; never logged."
    )
    embedding_batch_size: int = Field(default=64, ge=1, le=4096, description="Texts embedded per batch.")
    embedding_numpy_queries: bool = Field(
        default=True,
        description=(
            "The local model embeds a few texts at a time (queries) with NumPy, without loading "
            "PyTorch (same vectors, seconds less start-up); false runs everything on PyTorch."
        ),
    )
    embedding_server_warm_up: bool = Field(
        default=True,
        description=(
            "`librarian serve` loads PyTorch in the background at start, and the local model then "
            "embeds queries with it (faster per query than NumPy; PyTorch costs memory, see "
            "docs/benchmarks.md). False leaves a server's queries on NumPy until an ingest loads PyTorch."
        ),
    )
    embedding_timeout_seconds: float = Field(
        default=60.0, gt=0, description="Timeout of one request to a remote embeddings endpoint."
    )
    max_file_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=1,
        description="Files larger than this are skipped during ingest and reported with their path.",
    )
    chunk_max_chars: int = Field(
        default=1500,
        ge=200,
        description="Sections longer than this are split at paragraph boundaries (code blocks never split).",
    )
    search_candidates: int = Field(
        default=60, ge=1, description="Candidates each retriever (vector, lexical) contributes to fusion."
    )
    hybrid_vector_weight: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Weight of the vector retriever in score fusion; the lexical one gets the rest.",
    )
    search_learned_weight: float = Field(
        default=1.0,
        ge=0.0,
        le=10.0,
        description=(
            "Weight of learning from use in search: documents whose readers marked them helpful for "
            "a similar query rank higher (0 turns it off; docs/knowledge.md)."
        ),
    )
    search_learned_min_similarity: float = Field(
        default=0.3,
        ge=-1.0,
        le=1.0,
        description="How close (cosine) a past query must be to the search's to count for learning from use.",
    )
    exact_search_max_chunks: int = Field(
        default=20_000,
        ge=0,
        description=(
            "A filtered search whose scope holds at most this many chunks is scored exactly from the "
            "store instead of the approximate vector index (faster and complete for narrow filters)."
        ),
    )
    exact_search_cache_vectors: int = Field(
        default=100_000,
        ge=0,
        description=(
            "Vectors of recently searched small scopes kept in memory for exact search "
            "(384 dimensions: about 1.5 KB each)."
        ),
    )
    git_timeout_seconds: float = Field(
        default=300.0, gt=0, description="Time limit of one git clone or fetch."
    )
    allowed_private_hosts: list[str] = Field(
        default_factory=list,
        description=(
            "Hosts or networks (CIDR) that crawls, OpenAPI URLs and api_caller tasks may reach even "
            "though they are loopback, link-local or private addresses. Empty: all refused."
        ),
    )
    crawl_max_pages: int = Field(default=500, ge=1, description="Pages one website crawl fetches at most.")
    crawl_max_depth: int = Field(default=5, ge=0, description="Links followed from the start URL at most.")
    crawl_requests_per_second: float = Field(
        default=2.0, gt=0, description="Requests per second one crawl sends to a host at most."
    )
    crawl_user_agent: str = Field(
        default="librarian-crawler/0.1",
        description="User-Agent of the crawler, also matched against robots.txt.",
    )
    refresh_interval_seconds: int = Field(
        default=86_400,
        ge=60,
        description="How often `librarian schedule` refreshes a source that has no interval of its own.",
    )
    llm_provider: Literal["none", "openai", "anthropic"] = Field(
        default="none",
        description=(
            "LLM used for research summaries, plans and corrections: `openai` is any OpenAI-compatible "
            "chat endpoint (OpenAI, vLLM, Ollama, llama.cpp); `none` keeps everything offline."
        ),
    )
    llm_url: str | None = Field(
        default=None,
        description="Base URL of the LLM API (e.g. http://127.0.0.1:11434/v1); Anthropic's default if unset.",
    )
    llm_model: str | None = Field(default=None, description="Model name sent to the LLM API.")
    llm_api_key: SecretStr | None = Field(
        default=None, description="API key of the LLM API, if it needs one."
    )
    llm_timeout_seconds: float = Field(default=60.0, gt=0, description="Time limit of one LLM request.")
    llm_max_tokens: int = Field(default=1024, ge=16, description="Largest answer asked of the LLM.")
    api_token: SecretStr | None = Field(
        default=None,
        description=(
            "Bearer token that REST and MCP-over-HTTP clients must send (`Authorization: Bearer ...`). "
            "Unset: no authentication (bind to loopback only)."
        ),
    )
    broker_url: str | None = Field(
        default=None,
        description=(
            "RabbitMQ URL (amqp://user:pass@host:5672/vhost) that spreads workflow tasks over "
            "`librarian worker` processes. Unset: an in-process queue."
        ),
    )
    runtime_reward_success: float = Field(
        default=1.0, description="Reward of a task that succeeds first time."
    )
    runtime_reward_success_after_retry: float = Field(
        default=1.5, description="Reward of a task that succeeds after at least one retry."
    )
    runtime_reward_invalid_output: float = Field(
        default=-0.5, description="Reward of a task that ran but whose output failed validation."
    )
    runtime_reward_failure: float = Field(default=-1.0, description="Reward of a failed task.")
    runtime_reward_failure_per_retry: float = Field(
        default=-0.1, description="Added to a failed task's reward once per retry it had."
    )
    runtime_max_retries: int = Field(
        default=3, ge=0, description="Retries of one task before the workflow fails."
    )
    runtime_max_surgery_depth: int = Field(
        default=3, ge=0, description="Nested corrective sub-plans allowed under one original task."
    )
    runtime_task_timeout_seconds: float = Field(
        default=300.0, gt=0, description="Default wall-clock limit of one command or code task."
    )
    runtime_task_memory_mb: int = Field(
        default=2048,
        ge=16,
        description="Memory one process of a command or code task may write (RLIMIT_DATA), in MiB.",
    )
    runtime_task_output_bytes: int = Field(
        default=1_000_000, ge=1024, description="Stdout and stderr kept per task; the rest is cut."
    )
    runtime_sandbox_launcher: Literal["auto", "forkserver", "prlimit", "python"] = Field(
        default="auto",
        description=(
            "What sets a task's resource limits before it starts: a fork server living under them "
            "(Linux 5.3+), util-linux prlimit, or a Python wrapper; auto takes the first available."
        ),
    )
    runtime_sandbox_isolation: Literal["namespaces", "none"] = Field(
        default="namespaces",
        description=(
            "How tasks are isolated: `namespaces` runs each in its own PID, mount, network and user "
            "namespaces with bubblewrap, seeing only its workspace, a read-only system and its tools "
            "(the runtime refuses to start where the machine cannot); `none` runs them as the runtime's "
            "user, seeing what it sees: only for tasks you trust."
        ),
    )
    runtime_sandbox_network: Literal["off", "per_task", "on"] = Field(
        default="per_task",
        description=(
            "Whether isolated tasks reach the network: never, only tasks whose payload says "
            "`network: true`, or always. Without it a task has only a loopback device of its own."
        ),
    )
    runtime_sandbox_read_only_paths: list[Path] = Field(
        default_factory=list,
        description=(
            "Directories every isolated task sees read-only besides the system (/usr, /etc, /opt) and "
            "the prefixes of the directories on its PATH (shared tool installs, reference data)."
        ),
    )
    runtime_task_processes: int = Field(
        default=512,
        ge=8,
        description="Processes and threads one isolated task may have at once (a fork bomb stops here).",
    )
    runtime_lease_seconds: float = Field(
        default=120.0, gt=0, description="A dispatched task whose lease expires is dispatched again."
    )
    runtime_workers: int = Field(default=4, ge=1, description="Executor threads of one embedded worker.")
    runtime_corrector_timeout_seconds: float = Field(
        default=900.0,
        gt=0,
        description=(
            "How long one correction strategy may think (research, indexing documentation on demand, an "
            "LLM) before it counts as rejected and the next strategy is tried."
        ),
    )
    runtime_executor_prefetch: int = Field(
        default=1,
        ge=1,
        le=100,
        description=(
            "Dispatch messages one executor thread of `librarian worker` holds at once. Above 1, it "
            "runs those already waiting one after another and sends their results in one message: "
            "more tasks per second when tasks are short, but a result waits for the rest of its "
            "batch, and held tasks wait behind a long one. Keep 1 when tasks run long."
        ),
    )
    correction_trigger_files: list[Path] = Field(
        default_factory=list,
        description=(
            "YAML files of trigger rules added to the shipped ones (a rule with a shipped `id` "
            "overrides it; `enabled: false` turns it off); the shipped ones are in "
            "src/librarian/correction/default_triggers.yaml."
        ),
    )
    correction_confidence_threshold: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description="Confidence a correction needs before the self-correcting loop applies it.",
    )
    correction_ask_user: bool = Field(
        default=True,
        description="Pause a workflow with a question when no correction qualifies, before escalating.",
    )
    correction_max_chain: int = Field(
        default=3,
        ge=1,
        le=10,
        description=(
            "Corrections that may follow one another, each correcting the new error the last one met "
            "(a chain), before the loop stops going deeper."
        ),
    )
    correction_max_alternatives: int = Field(
        default=3,
        ge=1,
        le=10,
        description=(
            "Corrections tried from one failed command (or code) before the loop goes back a step or "
            "gives up with a report."
        ),
    )
    correction_index_on_demand: bool = Field(
        default=True,
        description=(
            "When the failing tool (or Python package) has no documentation indexed at the detected "
            "version, index it from the task's environment before researching: its --help walk, or "
            "its installed API."
        ),
    )
    tools_quarantine_imports: bool = Field(
        default=True,
        description=(
            "Tools imported from outside (MCP servers, OpenAPI documents, Python modules, CLI help) "
            "start quarantined: discovery and call_tool ignore them until an administrator approves."
        ),
    )
    tools_call_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Time limit of one tool call (and of listing an MCP server's tools)."
    )
    tools_failure_threshold: int = Field(
        default=3,
        ge=1,
        description="Consecutive failed calls after which a tool's circuit breaker opens (it leaves search).",
    )
    tools_probe_after_seconds: float = Field(
        default=300.0,
        ge=0,
        description="How long an open circuit waits before one probe call may bring the tool back.",
    )
    tools_substitute_confidence: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Confidence at which a workflow's unknown verb is substituted by the best match.",
    )

    @field_validator("home")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @property
    def resolved_database_url(self) -> str:
        """The database URL, with the SQLite default placed in ``home``."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.home / 'librarian.db').resolve()}"

    @property
    def resolved_vector_url(self) -> str:
        """The vector index URL, with the embedded Chroma default placed in ``home``."""
        if self.vector_url:
            return self.vector_url
        return f"chroma://{(self.home / 'chroma').resolve()}"

    @classmethod
    def load(cls, config_file: Path | None = None, **overrides: Any) -> Settings:
        """Build settings from overrides, environment, an optional TOML file and defaults.

        Args:
            config_file: TOML file to read; defaults to ``LIBRARIAN_CONFIG`` or ``<home>/config.toml``.
            overrides: values that win over every other source (e.g. ``home`` from ``--home``).

        Raises:
            InvalidInputError: the config file is not valid TOML or names an unknown setting.
        """
        env_values = _validated(cls, {}, "the LIBRARIAN_* environment")  # to find the config file
        home = Path(overrides.get("home") or env_values.home).expanduser()
        path = config_file or _env_path("LIBRARIAN_CONFIG") or home / "config.toml"
        file_values: dict[str, Any] = {}
        if path.is_file():
            try:
                file_values = tomllib.loads(path.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise InvalidInputError(f"config file {path} is not valid TOML: {exc}") from exc
            unknown = set(file_values) - set(cls.model_fields)
            if unknown:
                raise InvalidInputError(
                    f"config file {path} names unknown settings: {', '.join(sorted(unknown))}",
                    hint="see docs/configuration.md for the settings Librarian knows",
                )
        elif config_file is not None:
            raise InvalidInputError(f"config file {config_file} does not exist")
        # Environment beats the file: keep only file values the environment does not set.
        merged = {k: v for k, v in file_values.items() if f"LIBRARIAN_{k.upper()}" not in os.environ}
        merged.update({k: v for k, v in overrides.items() if v is not None})
        settings = _validated(cls, merged, f"{path} or the LIBRARIAN_* environment")
        settings._config_file = path.resolve() if path.is_file() else None
        return settings

    @property
    def config_file(self) -> Path | None:
        """The TOML file these settings were read from (:meth:`load`), or ``None``."""
        return self._config_file


def _validated(cls: type[Settings], values: dict[str, Any], origin: str) -> Settings:
    """``cls(**values)`` with validation errors turned into one message naming each field."""
    try:
        return cls(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        raise InvalidInputError(
            f"invalid settings from {origin}: {problems}",
            hint="see docs/configuration.md (environment variables are LIBRARIAN_<NAME>)",
        ) from exc


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def settings_reference() -> str:
    """Render every setting as a Markdown table (the body of ``docs/configuration.md``)."""
    lines = ["| setting | environment variable | default | description |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        # A list default is made by a factory (a fresh list per instance): show what it makes.
        value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
        default = value if value is not None else ""
        lines.append(f"| `{name}` | `LIBRARIAN_{name.upper()}` | `{default}` | {field.description} |")
    return "\n".join(lines) + "\n"
