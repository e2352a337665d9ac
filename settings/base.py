"""Defaults shared by every profile. Each setting says its type and default.

Resolution order (last wins): this module, the profile module chosen by the
``CRAWLER_PROFILE`` environment variable (``dev`` or ``prod``), then the
environment variables listed in ``settings.resolve.ENV_OVERRIDES``, then
``scrapy crawl -s NAME=VALUE``. See docs/settings.md.
"""

from __future__ import annotations

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"

# --- Scrapy core -------------------------------------------------------------
ROBOTSTXT_OBEY = True  # bool: obey robots.txt (per node until the shared cache lands)
CONCURRENT_REQUESTS = 16  # int: requests in flight per node
CONCURRENT_REQUESTS_PER_DOMAIN = 8  # int: per node and domain
DOWNLOAD_TIMEOUT = 30  # float, seconds
TELNETCONSOLE_ENABLED = False  # bool: no open debug port on production nodes
REMOTE_CONTROL_ENABLED = False  # bool: Scrapy 2.19's run-code-over-HTTP endpoint stays off on nodes
LOG_LEVEL = "INFO"  # str
FEED_EXPORT_ENCODING = "utf-8"  # str: feeds keep non-ASCII text as is
ADDONS = {"crawler.addon.ClusterAddon": 0}  # chooses cluster or standalone mode

# --- Node identity -----------------------------------------------------------
CRAWLER_PROFILE = "dev"  # str: profile that produced these settings (set by the resolver)
# str: node id in logs, Redis and Kafka headers; "" = <hostname>-<pid>; [A-Za-z0-9._:@-]{1,128}
CRAWLER_NODE_ID = ""

# --- Redis frontier (cluster mode) ------------------------------------------
# str: redis://host:port/db, rediss://, redis+sentinel://h:p/<service>/db, redis+cluster://h:p,h:p
# (docs/deployment.md); "" = standalone mode (Scrapy's own scheduler)
REDIS_URL = ""
# int >= 1: Redis commands one node runs at once over its one connection pool; more wait
REDIS_MAX_CONNECTIONS = 32
FRONTIER_LEASE_TIMEOUT = 60.0  # float s: a node silent this long loses its leases to others
FRONTIER_HEARTBEAT_INTERVAL = 5.0  # float s: lease extension + reclaim; <= 1/3 of the lease
FRONTIER_PREFETCH = 8  # int >= 1: requests leased ahead of the downloader
FRONTIER_RECLAIM_BATCH = 100  # int >= 1: expired leases returned per heartbeat
FRONTIER_IDLE_POLL = 0.5  # float s: wait after an empty lease before asking again
FRONTIER_WRITE_INTERVAL = 0.025  # float s 0-1: a write gathers what the node settles this long
FRONTIER_CLOSE_TIMEOUT = 10.0  # float s: how long a stopping node waits for Redis writes
FRONTIER_COMPRESS = True  # bool: request bodies stored compressed in Redis (False: plain JSON)
FRONTIER_SEEN_CACHE = 100_000  # int >= 0: fingerprints a node knows recorded (0 = off)
FRONTIER_SEEN_FEED = False  # bool: nodes share what they record through Kafka, into their caches
FRONTIER_SEEN_TOPIC = "{spider}-frontier-seen"  # str: the seen feed's topic
FRONTIER_PARTITIONS = 1  # int 1-1024: parts of a spider's frontier, by site (fixed per crawl)
FRONTIER_QUEUE_MAX = 0  # int >= 0: queued requests a part keeps in Redis, more go to Kafka (0: all)
FRONTIER_SPILL_BATCH = 1000  # int 1-100000: requests spilled to Kafka or read back, per part, step
FRONTIER_SPILL_INTERVAL = 1.0  # float s > 0: how often a node spills and refills
FRONTIER_BACKLOG_TOPIC = "{spider}-frontier-backlog"  # str: spilled requests, a partition per part
FRONTIER_LINK_CHECK = None  # bool: look links up first, send unseen bodies (None: where it pays)
# The project's middlewares, pipeline and extensions are added by ClusterAddon
# (crawler.addon.COMPONENTS) to whatever SPIDER_MIDDLEWARES, DOWNLOADER_MIDDLEWARES,
# ITEM_PIPELINES and EXTENSIONS a project or -s gives; list one with None to turn it off.
COMMANDS_MODULE = "crawler.commands"

# --- Politeness: one rate limit per site for the whole cluster ----------------
POLITENESS_ENABLED = True  # bool
POLITENESS_RATE = 4.0  # float req/s per site, all nodes together, or {"rate": r, "burst": b}
POLITENESS_BURST = 1  # int >= 1: requests a site may get at once after a quiet time
POLITENESS_JITTER = 0.0  # float [0, 1): each request's spacing times a random 1 +- this
POLITENESS_SITE_RATES: dict[str, object] = {}  # "host[:port]" -> rate or {"rate": r, "burst": b}
POLITENESS_PENALTY_STATUSES = [429, 503]  # list: statuses that cool a site down
POLITENESS_COOLDOWN = 5.0  # float s: first cooldown; doubles for strikes in the window
POLITENESS_MAX_COOLDOWN = 300.0  # float s
POLITENESS_STRIKE_WINDOW = 60.0  # float s: strikes closer than this escalate
POLITENESS_MIN_FACTOR = 0.1  # float (0, 1]: a penalty halves the rate down to this share
POLITENESS_RECOVERY = 0.05  # float: share of the rate regained per second after a penalty
POLITENESS_KEY = "politeness:{%(site)s}"  # str: Redis hash per site

# --- Seeds -------------------------------------------------------------------
SEEDS_KEY = "%(name)s:start_urls"  # str: key users push seeds into (plain URL or JSON)
SEEDS_TYPE = "list"  # str: list (LPUSH, taken in order) | set (SADD) | zset (ZADD, highest first)
SEEDS_INVALID_KEY = "%(name)s:start_urls:invalid"  # str: list of rejected seeds with reasons
SEEDS_BATCH_SIZE = 16  # int >= 1: seeds taken per Redis round trip
SEEDS_DONT_FILTER = True  # bool: seeds bypass dedup (pushing one again crawls it again)
# list: meta keys that change how a request is made (proxy, download_timeout, dont_*, browser,
# session_*...) which seeds may set anyway; "_" keys are never allowed (crawler.spiders.seed_rules)
SEEDS_ALLOWED_META: list[str] = []
REDIS_ENCODING = "utf-8"  # str: encoding of the seeds' bytes (a spider's redis_encoding wins)
SEEDS_MAX_BYTES = 65536  # int >= 1: larger seed payloads are rejected as too_large
SEEDS_WAIT_TIMEOUT = 0.5  # float > 0, seconds: how long one blocking pop waits for a seed
MAX_IDLE_TIME_BEFORE_CLOSE = 0  # float >= 0, seconds idle before the node closes; 0 = never

# --- Kafka pipeline ----------------------------------------------------------
KAFKA_BOOTSTRAP_SERVERS = ""  # str: host:port[,host:port]; "" = no Kafka, items go to a feed
KAFKA_TOPIC_TEMPLATE = "spider-{spider}-items"  # str: str.format with {spider} and {item_type}
KAFKA_PRODUCER_CONFIG: dict[
    str, object
] = {}  # dict: librdkafka options, override the defaults below
KAFKA_POLL_INTERVAL = 0.1  # float > 0, seconds between delivery-report polls
KAFKA_FLUSH_TIMEOUT = 30.0  # float >= 0, seconds to wait for outstanding deliveries at close
KAFKA_BACKPRESSURE_WAIT = 0.05  # float > 0, seconds between retries while the local queue is full
KAFKA_CREATE_TOPICS = True  # bool: create missing topics at start
KAFKA_TOPIC_PARTITIONS = 3  # int >= 1: partitions of topics created at start
KAFKA_TOPIC_REPLICATION = 1  # int >= 1: replication factor of topics created at start
KAFKA_TOPIC_CONFIG: dict[str, str] = {}  # dict: topic configs at creation, e.g. cleanup.policy
KAFKA_DLQ_TOPIC_TEMPLATE = "{topic}.dlq"  # str: dead-letter topic of a topic
KAFKA_SPOOL_DIR = "spool"  # str: local spool and dead-letter file, one folder per spider
KAFKA_SPOOL_REPLAY_INTERVAL = 30.0  # float s >= 0.1: how often the spool is replayed
KAFKA_MAX_OUTAGE = 300.0  # float s: Kafka failing longer than this pauses the crawl
# list: folders of <item_type>.json schemas; "builtin" = crawler/schemas
ITEM_SCHEMA_DIRS = ["builtin"]
CRAWLER_CRAWL_ID = "default"  # str: crawl id in Kafka headers (and the ledger)

# --- Standalone output -------------------------------------------------------
# str: JSON Lines feed used when Kafka is off and no FEEDS are set
CRAWLER_STANDALONE_FEED = "output/%(name)s-%(time)s.jsonl"


# --- Scope and limits (docs/scope-and-limits.md) -----------------------------------
REDIRECT_SCOPE_ENABLED = True  # bool: a redirect out of scope fails its request (redirect/offsite)
# int bytes >= 0: where inflating a compressed body stops; 0 = DOWNLOAD_MAXSIZE only
DECOMPRESSION_MAXSIZE = 64 * 1024 * 1024
LOG_MASK_CREDENTIALS = True  # bool: URL passwords and secret query values masked in every log line
# Scrapy's file:// handler off: a crawled page's link must not make a node read its own files
# (credentials, service-account tokens) into Kafka; such a request fails (download/NotSupported)
DOWNLOAD_HANDLERS = {"file": None}

# --- robots.txt, shared by the cluster ------------------------------------------------
ROBOTSTXT_CACHE_TTL = 86400  # int s >= 1: how long a site's robots.txt is reused by every node
ROBOTSTXT_CACHE_KEY = "robots:{%(site)s}"  # str: Redis string per site (the robots.txt body)

# --- Cookie jars, shared by the cluster (SharedCookiesMiddleware) ---------------------
# float s >= 0: a node that knows a shared jar looks at its version before a request at most
# this often, and reads it when another node changed it (a logout, a new login); 0: every request
COOKIES_SHARED_REFRESH = 0.5

# --- Observability: Prometheus metrics, startup line, cluster summary -----------------
METRICS_ENABLED = True  # bool: serve this node's stats as Prometheus metrics (PrometheusMetrics)
METRICS_HOST = "127.0.0.1"  # str: address the metrics server binds; containers: 0.0.0.0
METRICS_PORTS = "9410-9450"  # str: first free port of this range; "0" = any free port
# float s >= 0: a node that finished waits up to this long (and 1.5 scrape intervals) for a
# scrape of its final state before its metrics server stops; 0: stop at once
METRICS_FINAL_SCRAPE_WAIT = 30.0
STARTUP_LOG_ENABLED = True  # bool: one INFO line at start: node, profile, Redis, Kafka, metrics
CLUSTER_LOGSTATS_ENABLED = True  # bool: periodic node + cluster summary (cluster mode only)
CLUSTER_LOGSTATS_INTERVAL = 60.0  # float s > 0: how often the summary is logged

# --- Browser rendering (scrapy-playwright on Debian's Chromium) -------------------------
BROWSER_ENABLED = True  # bool: requests with meta browser=True are rendered in Chromium
BROWSER_EXECUTABLE = "/usr/bin/chromium"  # str: Chromium binary (Debian package chromium)
BROWSER_MAX_CONTEXTS = 0  # int >= 0: browser contexts per node (0: no limit, as scrapy-playwright)
BROWSER_MAX_PAGES = 2  # int >= 1: pages per context (a page costs about 300 MB)

# --- Crawl ledger: every node adds its stats' deltas to one hash per crawl -----
LEDGER_ENABLED = True  # bool: push to {<spider>}:ledger:<CRAWLER_CRAWL_ID> (needs REDIS_URL)
LEDGER_INTERVAL = 5.0  # float s > 0: how often a node pushes its deltas (and at close)

# --- Shared sessions (crawler.sessions) ---------------------------------------
SESSIONS_TTL = 86400.0  # float > 0, seconds a stored session (login or import) lives
SESSIONS_MAX_PER_MINUTE = 0  # int >= 0: requests per account per minute; 0 = no limit
SESSIONS_MAX_STRIKES = 3  # int >= 1: risky/banned marks that retire an account
SESSIONS_COOLDOWN = 600.0  # float >= 0, seconds an account rests after risky/banned
SESSIONS_LOGIN_LEASE = 30.0  # float > 0, seconds of the login lease (renewed while logging in)
SESSIONS_LOGIN_TIMEOUT = 120.0  # float > 0, seconds other nodes wait for a re-login
SESSIONS_KEY_PREFIX = "sessions"  # str: first part of every session key (no braces)

# --- Shared sessions middleware (spiders that set session_platform) --------------------
SESSIONS_ENABLED = True  # bool: SharedSessionMiddleware for spiders with session_platform
SESSIONS_MAX_TRIES = 3  # int >= 0: retries of a request with another account after a bad session
SESSIONS_WAIT = 60.0  # float s > 0: how long a request waits for a usable session

# --- zhihu spider (crawler/spiders/zhihu.py, docs/zhihu.md) -----------------------------
# Its topics: the spider's custom_settings set KAFKA_TOPIC_TEMPLATE = "spider-{spider}-{item_type}"
# (spider-zhihu-zhihu_content / _comment / _creator / _question / _list); -s ... still wins.
ZHIHU_WWW_URL = "https://www.zhihu.com"  # str: base of pages, explore and login
ZHIHU_ZHUANLAN_URL = "https://zhuanlan.zhihu.com"  # str: base of articles (/p/{id})
ZHIHU_API_URL = "https://www.zhihu.com/api/v4"  # str: base of API v4; requests under it are signed
ZHIHU_SEED_HOSTS = ["www.zhihu.com", "zhihu.com", "zhuanlan.zhihu.com"]  # list: seed URL hosts
ZHIHU_ENDPOINTS: dict[str, str] = {}  # dict: endpoint name -> URL template, over the defaults
ZHIHU_SIGNER = "crawler.zhihu.signer.Zse96Signer"  # str: module.Class of the x-zse-96 signer
ZHIHU_API_VERSION = "3.0.91"  # str: x-api-version header
ZHIHU_USER_AGENT = ""  # str: desktop browser user agent; "" = a recent desktop Chrome
ZHIHU_COMMENTS = True  # bool: crawl root and child comments of every content
ZHIHU_CREATORS = True  # bool: crawl the profile of every content and comment author
ZHIHU_CREATOR_CONTENT = True  # bool: people seeds also crawl their answers, articles, zvideos
ZHIHU_MAX_ANSWERS = 0  # int >= 0: contents per list (question, member list, search); 0 = all
ZHIHU_MAX_COMMENTS = 0  # int >= 0: comments per content (roots) and per root (children); 0 = all
ZHIHU_PAGE_SIZE = 20  # int >= 1: limit of content lists and search pages
ZHIHU_COMMENT_PAGE_SIZE = 20  # int >= 1: limit of comment pages
ZHIHU_ANSWER_SORT = "default"  # str: default | created | updated
ZHIHU_COMMENT_ORDER = "score"  # str: score | ts (root comments)
ZHIHU_MAX_RETRIES = 5  # int >= 0: re-enqueues of a request after a challenge page or 40362
ZHIHU_SESSIONS = True  # bool: use the shared session store (session_platform "zhihu")
ZHIHU_ACCOUNTS: list[str] = []  # list: accounts the spider may log in again (PasswordLogin)
ZHIHU_PASSWORD_ENV = "ZHIHU_PASSWORD_{account}"  # str: env var with an account's password  # noqa: S105
ZHIHU_PRIVACY = True  # bool: hash author ids (HMAC-SHA256), mask names, drop avatars in items
ZHIHU_PRIVACY_KEY = ""  # str: HMAC key; "" = a random key shared by the cluster through Redis
ZHIHU_CHALLENGE_BROWSER = False  # bool: one node solves __zse_ck challenge pages in Chromium
ZHIHU_CHALLENGE_TIMEOUT = 30.0  # float > 0: seconds for one solve (browser launch included)

# --- Frontier dedup (crawler/frontier/dedup.py, docs/redis-keys.md) -------------------
FRONTIER_DUPEFILTER = "exact"  # str: exact (set) | compact (exact, ~14 B/URL) | bloom (~2 B/URL)
FRONTIER_DEDUP_TTL = 0  # int s >= 0: a URL may be crawled again this long after; 0 = never
FRONTIER_DEDUP_CAPACITY = 1_000_000  # int >= 1: expected URLs (compact buckets, Bloom 1st slice)
FRONTIER_BLOOM_ERROR_RATE = 0.001  # float (0, 1): bloom: false-positive rate of the whole filter

# --- Operating: the `crawler` command -----------------------------------------------
KAFKA_DLQ_GROUP = "crawler-dead-letters"  # str: group whose commits mark dead letters handled
