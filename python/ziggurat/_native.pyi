# Type stubs of the Rust extension module `ziggurat._native`.
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

class ZigguratError(Exception): ...
class SegmentError(ZigguratError): ...
class LockTimeout(ZigguratError): ...

class Segment:
    """One shared-memory segment (the L2 tier), attached by name.

    Arguments:
        name: segment name, [A-Za-z0-9._-]{1,100};
            the file is ``{directory}/ziggurat.{name}.v{LAYOUT}``.
        size: byte budget of the whole file (int bytes).
        directory: where the file lives, default "/dev/shm".
        recreate: replace a foreign, corrupt or incompatible file instead of refusing it.
        avg_item_size: expected average entry size in bytes (key + value + ~16 B), sizes the index.
        shards: number of writer shards (power of two), default chosen from size.
        lock_timeout: seconds a writer waits for a shard lock before raising LockTimeout.
        group: a gid: a new file is created mode 0660 for that group, and a file of another
            user is accepted when it has that group and mode 0660.
        read_only: attach an existing file for reading only (never created or repaired); the
            owner rule still holds, and without ``group`` a file shared (mode 0660) with one
            of this process's groups is accepted too; a file of this user is refused only
            when an untrusted user can write it.
        huge_pages: "auto" (take huge pages where the directory offers them), "require"
            (fail with cause "no_huge_pages" when they do not back the mapping) or "off".
    """

    def __init__(
        self,
        name: str,
        size: int | str | None = None,
        *,
        directory: str = "/dev/shm",
        recreate: bool = False,
        avg_item_size: int = 128,
        shards: int | None = None,
        lock_timeout: float = 0.5,
        group: int | None = None,
        read_only: bool = False,
        huge_pages: str = "auto",
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def requested_size(self) -> int: ...
    @property
    def max_key_size(self) -> int: ...
    @property
    def max_value_size(self) -> int: ...
    @property
    def directory_notice(self) -> str | None: ...
    @property
    def shared_group(self) -> int | None: ...
    @property
    def file_id(self) -> tuple[int, int]: ...
    def huge_pages(self) -> dict[str, Any]: ...
    def get(self, key: str | bytes) -> bytes | None: ...
    def set(
        self, key: str | bytes, value: bytes, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None: ...
    def add(
        self, key: str | bytes, value: bytes, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> bool: ...
    def replace_if(
        self,
        key: str | bytes,
        expected: bytes,
        value: bytes,
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
    ) -> bool: ...
    def delete(self, key: str | bytes) -> bool: ...
    def invalidate_tag(self, tag: str) -> None: ...
    def clear(self) -> None: ...
    def app_load(self, i: int) -> int: ...
    def stamp(self, key: str | bytes) -> int: ...
    def wait(self, key: str | bytes, stamp: int, timeout: float) -> bool: ...
    def stats(self) -> dict[str, int]: ...
    def verify(self, repair: bool = True) -> dict[str, Any]: ...
    @property
    def read_only(self) -> bool: ...
    def inspect(self, key: str | bytes) -> dict[str, Any] | None:
        """The live record of ``key`` as stored, or None: ``{"value": bytes, "expiry_ms":
        the record's deadline (0: none), "now_ms": the clock it is on, "tags": [(cell,
        version, current version or None)], "record_bytes": its size in its ring}``."""
    def tag_version(self, tag: str) -> tuple[int, int]:
        """The tag's cell and that cell's current version."""
    def leases(self) -> list[tuple[int, int]]:
        """Per load-lease cell: ``(holder pid or 0, releases)``; read-only handles only."""
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def failure(self) -> str | None:
        """Why this handle stopped using its file (an operation met data it could not
        handle), or None; from then on reads miss and writes raise ``SegmentError`` with
        cause "damaged"."""
    def unlink(self) -> None: ...
    def __enter__(self) -> Segment: ...
    def __exit__(self, *exc: object) -> None: ...

class MutationError(ZigguratError): ...

LAYOUT_VERSION: int
#: At most this many tags per entry (a tag itself has no length limit).
MAX_TAGS: int
#: The longest finite TTL in seconds (100 years); math.inf means never expires.
MAX_TTL: float
#: The largest cache size in bytes (1 PiB) that ``parse_size`` accepts.
MAX_SIZE: int
#: The longest cache name, in characters.
MAX_NAME: int
#: The longest ``version`` option, in characters.
MAX_VERSION: int
BUILD: str

def parse_size(size: int | str) -> int: ...
def check_ttl(ttl: float, what: str, method: str) -> float:
    """``ttl`` if the Cache takes it as a TTL (seconds > 0, at most ``MAX_TTL``, or
    ``math.inf``), else a ValueError naming ``method`` and its argument ``what``."""

def incr_overflow(key: str) -> str:
    """What an ``incr`` of the counter ``key`` (its repr) says when its result leaves
    the signed 64-bit range."""

def check_defaults(
    fetch_defaults: tuple[float, float | None, float | None, float, float],
    refresh_ahead: float,
    degraded_ttl: float | None,
) -> None:
    """Raises a ValueError naming the first of a cache's defaults out of its range;
    ``fetch_defaults`` is (ttl, neg_ttl, stale_ttl, jitter, loader_timeout), as ``Cache``
    takes them."""

def segment_name(name: str, version: str | None = None) -> str:
    """The segment of the cache ``name`` at ``version`` (``name.ver-{version}``), or a
    ValueError naming the option that breaks the rule."""

def name_and_version(segment: str) -> tuple[str, str | None]:
    """The name and version a segment name holds."""

def namespace_parts(name: str) -> tuple[str, str]:
    """The key prefix and hidden tag of the namespace ``name``, or a ValueError."""

def check_segment_name(name: str) -> None:
    """Raises a ValueError unless ``name`` may name a segment (the engine's rule)."""

def metric_families() -> list[dict[str, str]]:
    """The metric families both front ends report: ``group`` ("cache", "host" or
    "process"), ``key``, ``prom``, ``otel``, ``kind``, ``unit``, ``help`` and ``scope``
    ("host": one figure for the host; "process": this process's own, summed over
    processes) of each."""

def rules() -> dict[str, int | float | str | tuple[str, ...]]:
    """Every rule of ziggurat-cache's table by its dotted name ("tags.max", "defaults.ttl")."""

def install_quick(cls: type[Cache], names: list[str]) -> None: ...

MAX_KEY: int

def check_key(key: object, method: str) -> None:
    """Raises the TypeError or ValueError ``method`` raises for a key it cannot store
    (not str or bytes, not 1 to ``MAX_KEY`` bytes of UTF-8), naming ``method``.

    >>> check_key("a\\udc80", "Cache.get_many")
    Traceback (most recent call last):
    ...
    ValueError: Cache.get_many(): key is not valid UTF-8 (lone surrogate at index 1); ...
    """

class AutoCodec:
    """JSON (orjson) for plain JSON-shaped values, pickle protocol 5 for the rest.

    Raises ImportError when orjson is not installed.
    """

    def __init__(self) -> None: ...
    def dumps(self, obj: Any) -> bytes: ...
    def loads(self, data: bytes | bytearray | memoryview) -> Any: ...

class LoadTimeout(ZigguratError): ...

STEP_HIT: int
STEP_LOAD: int
STEP_WAIT: int
STEP_LOCAL: int
FOUND_MISS: int
FOUND_HIT: int
FOUND_NEGATIVE: int
FOUND_STALE: int

class Peek:
    """What ``Cache.peek`` found."""

    found: int
    value: Any
    seconds_left: float
    ttl: float

class Step:
    """One step of a miss (see ``ziggurat.loader.StepKind``)."""

    @property
    def kind(self) -> int: ...
    @property
    def value(self) -> Any: ...
    @property
    def key(self) -> Any: ...

class Cache:
    """The native half of ``ziggurat.Cache`` (L1, reads and writes of the segments)."""

    def __init__(
        self,
        main: Segment | None,
        neg: Segment | None,
        l1_items: int,
        l1_neg_items: int,
        loads: Any,
        dumps: Any,
        fetch_defaults: tuple[float, float | None, float | None, float, float],
        copy: str = "shared",
        debug: bool = False,
        refresh: Callable[[Step, Callable[[], Any]], None] | None = None,
        local: Callable[[Step, Callable[[], Any]], Any] | None = None,
        refresh_ahead: float = 0.0,
        on_write_error: Callable[[str, Any, Exception], None] | None = None,
        codec: AutoCodec | None = None,
        degraded_ttl: float | None = None,
    ) -> None: ...
    def fetch_begin(
        self,
        key: str | bytes,
        *,
        ttl: float | None = None,
        tags: Iterable[str] | None = None,
        neg_ttl: float | None = None,
        stale_ttl: float | None = None,
    ) -> Step: ...
    def fetch_refresh(self, step: Step) -> Step | None: ...
    def fetch_wait(self, step: Step) -> None: ...
    def fetch_next(self, step: Step) -> Step: ...
    def fetch_run(self, step: Step, loader: Callable[[], Any]) -> Any: ...
    def fetch_end(
        self,
        step: Step,
        value: Any,
        error: BaseException | None,
        seconds: float,
        ctx: Any = None,
    ) -> Any: ...
    def fetch_abandon(self, step: Step) -> None: ...
    def set(
        self,
        key: str | bytes,
        value: Any,
        *,
        ttl: float | None = None,
        tags: Iterable[str] | None = None,
    ) -> None: ...
    def add(
        self,
        key: str | bytes,
        value: Any,
        *,
        ttl: float | None = None,
        tags: Iterable[str] | None = None,
    ) -> bool: ...
    def incr(
        self,
        key: str | bytes,
        delta: int = 1,
        *,
        default: int | None = None,
        tags: Iterable[str] | None = None,
    ) -> int: ...
    def touch(self, key: str | bytes, ttl: float | None = None) -> bool: ...
    def loader_counts(self) -> dict[str, int]: ...
    def get(self, key: str | bytes, default: Any = None) -> Any: ...
    def get_local(self, key: str | bytes, default: Any, missing: Any) -> Any: ...
    def get_below(self, key: str | bytes, default: Any) -> Any: ...
    def fetch(
        self,
        key: str | bytes,
        loader: Callable[[], Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
        neg_ttl: float | None = None,
        stale_ttl: float | None = None,
    ) -> Any: ...
    def peek(self, key: str | bytes) -> Peek: ...
    def store_value(
        self,
        key: str | bytes,
        value: Any,
        ttl: float | int,
        tags: Iterable[str] | None = None,
        stale_ttl: float | None = None,
    ) -> None: ...
    def delete(self, key: str | bytes) -> bool: ...
    def invalidate_tags(self, tags: Iterable[str]) -> None: ...
    def clear(self) -> None: ...
    def clear_l1(self) -> None: ...
    def stamp(self, key: str | bytes) -> int: ...
    # The tier below the host (the cluster tier).
    def join_below(
        self,
        ask: Callable[[str | bytes, bool], tuple[Any] | None],
        tell: Callable[[str | bytes, Any, float, list[str]], None],
    ) -> None: ...
    def seen(self, key: str | bytes) -> tuple[int, int, int] | None: ...
    def fill(
        self,
        key: str | bytes,
        value: Any,
        ttl: float,
        tags: Iterable[str] | None,
        seen: tuple[int, int, int],
        encoded: bytes | None = None,
        of: str | bytes | None = None,
    ) -> bool: ...
    def fetch_below(self, step: Step) -> tuple[Any] | None: ...
    def app_load(self, i: int) -> int: ...
    def app_cas(self, i: int, old: int, new: int) -> bool: ...
    @property
    def degraded(self) -> bool: ...
    def stats(self) -> dict[str, int]: ...
    def __len__(self) -> int: ...

def open_pair(
    name: str,
    size: int | str | None,
    neg_size: int | str | None,
    *,
    directory: str = "/dev/shm",
    recreate: bool = False,
    avg_item_size: int = 256,
    lock_timeout: float = 0.5,
    group: int | None = None,
    huge_pages: str = "auto",
) -> tuple[Segment, Segment, str | None]:
    """A cache's two segments (``name`` and ``name.neg``), created both or neither;
    ``size=None``: the default budget fitted to the directory, ``notice`` saying so."""

def huge_page_policy(directory: str) -> dict[str, Any]:
    """What ``directory``'s file system and the kernel offer a segment in huge pages."""

def degraded_refusal(call: str, reason: str) -> str:
    """The message of ``degraded="raise"``'s error: ``call``, then the reason."""

def degraded_warning(name: str, reason: str, local_ttl: float | None) -> str:
    """The warning of a cache without its segment; ``local_ttl`` None for passthrough."""

# The HTTP cache (the ziggurat-http crate), driven by ziggurat.http. A stored response
# crosses as its value bytes (store.Stored.value); tuples tagged by their first item.
HTTP_HOP_BY_HOP: tuple[bytes, ...]
HTTP_STALE_FORBIDDING: tuple[str, ...]
MAX_HTTP_TTL: float
MAX_URL_KEY: int
HTTP_CLIENT_CONDITIONALS: tuple[bytes, ...]
HTTP_ERROR_STATUSES: tuple[int, ...]
HTTP_PASS_CONDITIONALS: tuple[bytes, ...]
HTTP_SURROGATE_CAPABILITY: str
Lines = Sequence[tuple[bytes, bytes]]

def http_field(headers: Lines, name: bytes) -> bytes | None: ...
def http_fields(headers: Lines, name: bytes) -> list[bytes]: ...
def http_parse_cache_control(values: Iterable[bytes]) -> dict[str, str | None]: ...
def http_vary_digest(
    names: Iterable[str], headers: Lines
) -> tuple[bytes, tuple[bytes | None, ...]]: ...
def http_normalise_host(raw: bytes | None) -> str | None: ...
def http_split_tags(values: Iterable[bytes]) -> list[str]: ...
def http_connection_listed(headers: Lines) -> set[bytes]: ...
def http_cache_status(kind: str, **params: str | int | bool) -> bytes: ...
def http_decode(value: object) -> tuple[Any, ...] | None: ...
def http_encode(
    status: int,
    headers: Lines,
    body: bytes,
    times: Sequence[float],
    flags: Iterable[str],
    etag: bytes | None,
    last_modified: bytes | None,
    vary: Sequence[str],
    vary_values: Sequence[bytes | None],
    tags: Sequence[str],
) -> bytes: ...
def http_encode_variants(names: Sequence[str], generation: str, until: float) -> bytes: ...
def http_base_key(scheme: str, host: str, target: bytes) -> bytes: ...
def http_variant_key(base: bytes, generation: str, digest: str) -> bytes: ...
def http_lock_key(key: bytes) -> bytes: ...
def http_purge_mark(base: bytes) -> bytes: ...
def http_purge_keys(base: bytes) -> list[bytes]: ...
def http_url_key(url: str) -> bytes | None: ...
def http_invalidated_keys(scheme: str, host: str, target: bytes, headers: Lines) -> list[bytes]: ...
def http_host_allowed(host: str, allowed: Sequence[str]) -> bool: ...
def http_overrides_method(target: bytes) -> bool: ...

HTTP_DEFAULTS: dict[str, Any]

def http_save_writes(
    base: bytes,
    value: bytes,
    ttl: float,
    now: float,
    record: bytes | None,
    fresh: bytes,
    guarded: bool,
) -> list[tuple[bytes, bytes, float, list[str]]]: ...
def http_purge_request(
    token: bytes,
    tag_header: bytes,
    client_allowed: bool,
    scheme: str,
    host_raw: bytes | None,
    target: bytes,
    headers: Lines,
) -> tuple[Any, ...]: ...
def http_purge_answer(
    what: int, found: bool, cache_status: bool
) -> tuple[int, list[tuple[bytes, bytes]], bytes]: ...
def http_gateway_timeout(cache_status: bool) -> tuple[int, list[tuple[bytes, bytes]], bytes]: ...
def http_client_headers(
    headers: Lines,
    strip: Sequence[bytes],
    how: int,
    cs: bytes | None,
    status: int = 200,
    initial_age: float = 0.0,
    body_len: int = 0,
) -> list[tuple[bytes, bytes]]: ...
def http_fresh_hit(
    value: bytes, now: float, hidden: Sequence[bytes], cache_status: bool
) -> tuple[list[tuple[bytes, bytes]], float, float] | None: ...
def http_refresh_lock_key(key: bytes) -> bytes: ...
def http_setting_problem(setting: str, value: str) -> str | None: ...
def http_decide(
    opts: HttpOptions, req: Any, status_code: int, headers: Lines, now: float
) -> tuple[Any, ...]: ...

class HttpExchange:
    """One request's fill, the ``ziggurat-http`` crate's ``Exchange``."""

    def __init__(
        self,
        method: str,
        headers: Lines,
        directives: dict[str, str | None],
        has_auth: bool,
        base: bytes,
        key: bytes,
        now: float,
    ) -> None: ...
    @property
    def key(self) -> bytes: ...
    @property
    def holds_stale(self) -> bool: ...
    @property
    def coalesce(self) -> bool: ...
    @property
    def stored(self) -> bool: ...
    @property
    def tee(self) -> bool: ...
    def lookup(self, value: bytes | None, now: float) -> tuple[Any, ...]: ...
    def reply(
        self, value: bytes, age: float, hidden: Sequence[bytes], status: str | None
    ) -> tuple[int, list[tuple[bytes, bytes]], bool]: ...
    def collapsed(self, value: bytes, now: float) -> bytes | None: ...
    def recheck(self, value: bytes, now: float) -> bytes | None: ...
    def app_timeout(self, limit: float | None) -> float | None: ...
    def upstream_headers(
        self, drop: Sequence[bytes], capability: bytes | None
    ) -> list[tuple[bytes, bytes]]: ...
    def needs_current(self, status: int) -> bool: ...
    def head(
        self,
        opts: HttpOptions,
        current: bytes | None,
        status_code: int,
        headers: Lines,
        request_time: float,
        now: float,
    ) -> tuple[Any, ...]: ...
    def pass_status(self, status: int, detail: str) -> bytes: ...
    def saved(self, status: int, outcome: str) -> bytes: ...
    def answers_validators(self, status: int) -> bool: ...
    def stale_if_error(
        self, opts: HttpOptions, current: bytes | None, app_status: int, detail: str, now: float
    ) -> bytes | None: ...
    def head_update(
        self, opts: HttpOptions, headers: Lines, now: float
    ) -> tuple[bytes, float] | Literal[False] | None: ...
    def release(self) -> None: ...
    def rekey(self, key: bytes) -> bool: ...
    def marker(self) -> int: ...

class HttpOptions:
    """The options of one middleware as the crate reads them (``Options.native``)."""

    def __init__(
        self,
        targeted_fields: Sequence[bytes],
        heuristic: bool,
        default_ttl: float | None,
        stale_if_error: float,
        revalidate_keep: float,
        tag_header: bytes,
        store_set_cookie: bool,
        max_body: int,
        request_directives: bool,
        bypass_headers: Sequence[bytes],
        bypass_cookies: Sequence[bytes],
        allowed_hosts: Sequence[str],
        purge: bool,
        store_auth_must_revalidate: bool,
        key_headers: Sequence[str],
    ) -> None: ...
    def classify(
        self, method: str, scheme: str, host_raw: bytes | None, target: bytes, headers: Lines
    ) -> tuple[Any, ...]: ...
    def blockers(self) -> list[bytes]: ...

# The cluster tier's rules (ziggurat-cluster).
CLUSTER_READ: str
CLUSTER_WRITE: str
CLUSTER_RELEASE: str
CLUSTER_MAC_LEN: int
CLUSTER_MIN_SECRET: int
CLUSTER_MAX_AGE_US: int
CLUSTER_MAX_SKEW_US: int
CLUSTER_ALL: str
CLUSTER_EXACT_INT: int
CLUSTER_OWN_PAUSE_US: int

class ClusterSigner:
    def __init__(self, name: str, secrets: list[bytes]) -> None: ...
    def value_mac(self, key: bytes, body: bytes) -> bytes: ...
    def value_ok(self, key: bytes, body: bytes, mac: bytes) -> bool: ...
    def counter_ok(self, key: bytes, written: bytes, mac: bytes) -> bool: ...

class ClusterDown(Exception): ...
class ClusterReply(Exception): ...

class ClusterLink:
    def __init__(
        self, urls: list[str], cluster: bool, timeout: float, retry_after: float
    ) -> None: ...
    def command(self, *parts: bytes | str | int | float) -> Any: ...
    def script(
        self, sha: str, source: str, keys: list[bytes], argv: list[bytes | str | int | float]
    ) -> Any: ...
    def count_error(self) -> None: ...
    def record(self, failed: bool | None) -> None: ...
    @property
    def resting(self) -> bool: ...
    @property
    def up(self) -> bool: ...
    @property
    def errors(self) -> int: ...
    @property
    def timeouts(self) -> int: ...
    @property
    def server(self) -> str: ...

class ClusterReader:
    def __init__(self, tier: ClusterTier, dedicated: bool, block: float) -> None: ...
    def start(self) -> None: ...
    def halt(self) -> None: ...
    @property
    def halted(self) -> bool: ...
    def stop(self) -> None: ...
    def claim(self) -> int: ...

class ClusterTier:
    def __init__(
        self,
        link: ClusterLink,
        signer: ClusterSigner,
        cache: Any,
        name: str,
        stream_length: int,
        single_flight: bool,
        loader_timeout: float,
        warn: Any,
    ) -> None: ...
    def ask(
        self, key: str | bytes, loading: bool
    ) -> tuple[str, bytes | int, float, tuple[str, ...]] | None: ...
    def tell(
        self, key: str | bytes, value: bytes | int | None, ttl: float, tags: list[str]
    ) -> None: ...
    def set(self, key: str | bytes, value: bytes | int, ttl: float, tags: list[str]) -> bool: ...
    def add(
        self, key: str | bytes, value: bytes | int, ttl: float, tags: list[str]
    ) -> bool | None: ...
    def delete(self, key: str | bytes) -> bool: ...
    def incr(
        self,
        key: str | bytes,
        delta: int,
        default: int | None,
        ttl: float,
        tags: list[str],
    ) -> int | None: ...
    def touch(self, key: str | bytes, ttl: float) -> bool | None: ...
    def invalidate_tags(self, tags: list[str]) -> None: ...
    def clear(self) -> None: ...
    def clock(self) -> int: ...
    def saw(self, w: int) -> None: ...
    def host_id(self) -> str: ...
    def count_bad(self) -> None: ...
    def counts(self) -> dict[str, int]: ...

def cluster_encode(
    signer: ClusterSigner, key: bytes, data: bytes | int, expiry_ms: int, w: int, tags: list[str]
) -> bytes: ...
def cluster_counter_head(signer: ClusterSigner, key: bytes, w: int) -> bytes: ...
def cluster_decode(
    signer: ClusterSigner, key: bytes, stored: bytes, pttl: int, now_us: int, prefixed: bool
) -> tuple[str, int] | tuple[str, bytes | int, float, tuple[str, ...], int]: ...
def cluster_body_start(stored: bytes) -> int | None: ...

CLUSTER_STALE_MS: int
CLUSTER_CHECK_MS: int
CLUSTER_WORDS: dict[str, int]
CLUSTER_FIGURES: list[tuple[str, int, float]]

def cluster_process_alive(pid: int) -> bool: ...
def cluster_timeout_ok(seconds: float) -> bool: ...

CLUSTER_MAX_TIMEOUT_S: float
CLUSTER_MIN_STREAM_LENGTH: int
CLUSTER_RETRY_AFTER_S: float

CLUSTER_SCHEMES: tuple[str, ...]

def cluster_redacted(url: str) -> str: ...
def cluster_scrubbed(text: str, url: str) -> str: ...
def cluster_refusal(message: str) -> str: ...
