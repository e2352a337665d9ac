"""``REDIS_URL`` forms: parsing and validation, then real clients on one server, a Sentinel
setup, a TLS server and a Redis Cluster (fixtures in tests/conftest.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from scrapy.settings import Settings

from crawler.addon import ClusterAddon
from crawler.demo.site import Site
from crawler.devservices import RedisServer
from crawler.frontier.client import FrontierClient, NewRequest
from crawler.frontier.keys import FrontierKeys
from crawler.redis_checks import topology_problem
from crawler.redis_connection import async_client, sync_client
from crawler.redis_url import RedisConfig, TlsOptions, Topology, redact_url
from settings.resolve import resolve_settings
from tests.cluster import crawl_into_kafka
from tests.frontier_state import fingerprint_of, queued

SECRET = "s3cret"  # noqa: S105 - a password no message may show
PW = "pw"
THIS_FILE = str(Path(__file__).resolve())
TOPOLOGIES = ["redis_url", "redis_sentinel_url", "redis_tls_url", "redis_cluster_url"]


# -- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://h", RedisConfig(Topology.SERVER, (("h", 6379),))),
        (
            "redis://:pw@h:7000/3?socket_timeout=2.5",
            RedisConfig(Topology.SERVER, (("h", 7000),), 3, password=PW, socket_timeout=2.5),
        ),
        (
            "rediss://u:p%40ss@h/0?ssl_cert_reqs=none&ssl_check_hostname=false",
            RedisConfig(
                Topology.SERVER,
                (("h", 6379),),
                username="u",
                password="p@ss",  # noqa: S106 - percent-decoded from the URL
                tls=TlsOptions(cert_reqs="none", check_hostname=False),
            ),
        ),
        (
            f"rediss://h?ssl_ca_certs={THIS_FILE}",
            RedisConfig(Topology.SERVER, (("h", 6379),), tls=TlsOptions(ca_certs=THIS_FILE)),
        ),
        (
            "redis+sentinel://s1,s2:26380/mymaster",
            RedisConfig(Topology.SENTINEL, (("s1", 26379), ("s2", 26380)), service="mymaster"),
        ),
        (
            "redis+sentinel://:pw@s1/mymaster/4?sentinel_password=pwpw&socket_connect_timeout=1",
            RedisConfig(
                Topology.SENTINEL,
                (("s1", 26379),),
                4,
                service="mymaster",
                password=PW,
                sentinel_password=PW * 2,
                socket_connect_timeout=1.0,
            ),
        ),
        (
            "redis+cluster://n1:7000,n2:7001,[::1]:7002/0",
            RedisConfig(Topology.CLUSTER, (("n1", 7000), ("n2", 7001), ("::1", 7002))),
        ),
        ("rediss+cluster://n1", RedisConfig(Topology.CLUSTER, (("n1", 6379),), tls=TlsOptions())),
    ],
)
def test_urls_parse(url: str, expected: RedisConfig) -> None:
    assert RedisConfig.from_url(url) == expected


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://h", "the scheme must be one of redis://, rediss://, redis+sentinel://"),
        (f"redis://:{SECRET}@h1,h2", "name one host"),
        (f"redis+cluster://:{SECRET}@h/1", "a Redis Cluster has only database 0, not 1"),
        ("redis+sentinel://h", "names the master's service"),
        ("redis://h/x", "database 'x' is not a number"),
        ("redis://h/１", "database '１' is not a number"),  # another script's digit (a review)
        ("redis://h/²", "database '²' is not a number"),  # int() refused it, naming nothing
        ("redis://h:６３７９", "'h:６３７９' is not host[:port]"),
        ("redis://h/0/1", "more parts than [/service]/db"),
        ("redis://h:99999", "port 99999 is not between 1 and 65535"),
        ("redis://h:port", "'h:port' is not host[:port]"),
        (f"redis://:{SECRET}@h?ssl_ca_certs=/x", "unknown option ssl_ca_certs (TLS options need"),
        ("redis://h?db=2", "unknown option db"),
        ("rediss://h?ssl_ca_certs=/nonexistent.pem", "ssl_ca_certs='/nonexistent.pem' is not a"),
        ("rediss://h?ssl_cert_reqs=maybe", "ssl_cert_reqs='maybe' is not one of required"),
        ("rediss://h?ssl_check_hostname=perhaps", "ssl_check_hostname='perhaps' is not true"),
        (f"rediss://h?ssl_certfile={THIS_FILE}", "ssl_certfile and ssl_keyfile"),
        ("redis://h?socket_timeout=0", "socket_timeout='0' must be a number of seconds > 0"),
        ("redis://h?socket_timeout=1&socket_timeout=2", "option socket_timeout is given twice"),
        (f"redis+sentinel://h/m?sentinel_password={SECRET}&bogus=1", "unknown option bogus"),
        ("redis://", "no host"),
    ],
)
def test_bad_urls_name_the_setting_and_hide_passwords(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=r"^REDIS_URL=") as caught:
        RedisConfig.from_url(url)
    assert problem in str(caught.value)
    assert SECRET not in str(caught.value)
    with pytest.raises(ValueError, match=r"^--redis="):
        RedisConfig.from_url(url, "--redis")


def test_a_bad_redis_url_stops_the_node_at_start() -> None:
    with pytest.raises(ValueError, match="REDIS_URL='redis://h1,h2': redis:// and rediss://"):
        ClusterAddon().update_settings(
            Settings({**resolve_settings({}), "REDIS_URL": "redis://h1,h2"})
        )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:secret@127.0.0.1:6379/3", "redis://:***@127.0.0.1:6379/3"),
        ("rediss://user:p%40ss@redis.internal/0", "rediss://user:***@redis.internal/0"),
        ("redis://redis:6379/0", "redis://redis:6379/0"),
        ("redis://user@redis:6379/0", "redis://user@redis:6379/0"),
        ("redis://h/0?password=secret&db=2", "redis://h/0?password=***&db=2"),
        (
            "redis+sentinel://u:a/b@c@s1,s2/m?sentinel_password=x&socket_timeout=1",
            "redis+sentinel://u:***@s1,s2/m?sentinel_password=***&socket_timeout=1",
        ),
    ],
)
def test_passwords_are_redacted(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://u:{SECRET}@h:1/2", "redis://h:1/2"),
        (f"rediss+sentinel://:{SECRET}@s1,[::1]:9/m/3", "rediss+sentinel://s1:26379,[::1]:9/m/3"),
        (f"redis+cluster://:{SECRET}@a:1,b:2?socket_timeout=1", "redis+cluster://a:1,b:2"),
    ],
)
def test_display_and_repr_never_show_the_password(url: str, shown: str) -> None:
    config = RedisConfig.from_url(url)
    assert config.display == shown
    assert SECRET not in repr(config)


# -- real servers -----------------------------------------------------------------------------


def new(name: str, priority: int = 0) -> NewRequest:
    return NewRequest(
        fingerprint=fingerprint_of(name), score=-float(priority), body=f'{{"u":"{name}"}}'.encode()
    )


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_frontier_round_trip(topology: str, request: pytest.FixtureRequest) -> None:
    url: str = request.getfixturevalue(topology)
    keys = FrontierKeys.for_spider("a")

    async def scenario() -> None:
        client = async_client(url, max_connections=2)
        a, b = FrontierClient(client, keys, "node-a"), FrontierClient(client, keys, "node-b")
        added = await a.complete(None, "done", [new("low"), new("high", 5), new("low")])
        assert (added.added, added.duplicates) == (2, 1)
        first, second = await a.lease(2, 60_000)
        assert first.body == b'{"u":"high"}'
        assert (await b.complete(first.id, "done", [])).status == "stolen"
        beat = await a.heartbeat([first.id, second.id], 60_000, 60_000, 10, epoch="")
        assert (beat.extended, beat.reclaimed, beat.lost) == (2, 0, ())
        done = await a.complete(first.id, "done", [new("child"), new("high")])
        assert (done.status, done.added, done.duplicates) == ("done", 1, 1)
        assert await a.release([second.id]) == 1
        assert await a.pending() == 2
        await client.aclose()

    asyncio.run(scenario())
    client = sync_client(url)
    try:
        assert queued(client, keys) == 2
        assert client.scard(keys.dupefilter) == 3
        assert client.zcard(keys.leases) == 0
    finally:
        client.close()


def connections_to_master_of(url: str, key: str) -> int:
    """Clients connected to the server that holds ``key`` (this check's own included)."""
    client = sync_client(url)
    try:
        if isinstance(client, redis.RedisCluster):
            node = client.get_node_from_key(key)  # type: ignore[no-untyped-call]
            direct = redis.Redis(host=node.host, port=node.port)
            try:
                return int(direct.info("clients")["connected_clients"])
            finally:
                direct.close()
        return int(client.info("clients")["connected_clients"])
    finally:
        client.close()


@pytest.mark.parametrize("topology", ["redis_url", "redis_sentinel_url", "redis_cluster_url"])
def test_max_connections_makes_commands_wait(topology: str, request: pytest.FixtureRequest) -> None:
    url: str = request.getfixturevalue(topology)
    key = "{a}:counter"

    async def used_by(cap: int | None) -> int:
        """Connections to the key's server that 40 commands at once use; all must succeed."""
        client = async_client(url, max_connections=cap)
        incr = client.register_script("return redis.call('INCR', KEYS[1])")
        first = int(await incr(keys=[key]))  # the first connection (and the cluster's topology)
        before = connections_to_master_of(url, key)
        results = await asyncio.gather(*(incr(keys=[key]) for _ in range(40)))
        used = 1 + connections_to_master_of(url, key) - before
        await client.aclose()
        assert sorted(int(n) for n in results) == list(range(first + 1, first + 41))
        return used

    assert asyncio.run(used_by(3)) <= 3
    assert asyncio.run(used_by(None)) > 3  # without the cap the same load opens more


def test_the_sentinel_url_finds_the_master(redis_sentinel_url: str) -> None:
    config = RedisConfig.from_url(redis_sentinel_url)
    ((host, port),) = config.hosts
    sentinel = redis.Redis(host=host, port=port, decode_responses=True)
    try:
        state = sentinel.sentinel_master(config.service)
    finally:
        sentinel.close()
    assert isinstance(state, dict)
    assert int(state["port"]) != port
    client = sync_client(config)
    master = redis.Redis(host=state["ip"], port=int(state["port"]))
    try:
        client.set("{a}:via", "sentinel")
        assert master.get("{a}:via") == b"sentinel"
    finally:
        client.close()
        master.close()
    unknown = sync_client(dataclasses.replace(config, service="no-such-service"))
    with pytest.raises(redis.ConnectionError, match="No master found for 'no-such-service'"):
        unknown.ping()
    unknown.close()


def test_the_tls_url_needs_tls_and_the_client_certificate(redis_tls_url: str) -> None:
    """The server refuses plain text and clients without a certificate, so a working
    ``sync_client`` proves it used the URL's TLS options."""
    config = RedisConfig.from_url(redis_tls_url)
    assert config.tls is not None
    ((host, port),) = config.hosts
    client = sync_client(config)
    assert client.ping()
    client.close()
    once = Retry(NoBackoff(), 0)
    for refused in (
        redis.Redis(host=host, port=port, retry=once),  # plain text on the TLS port
        redis.Redis(  # TLS without the client certificate
            host=host, port=port, retry=once, ssl=True, ssl_ca_certs=config.tls.ca_certs
        ),
    ):
        with pytest.raises(redis.ConnectionError):
            refused.ping()
        refused.close()


def test_nodes_crawl_through_sentinel_and_tls(
    redis_sentinel_url: str,
    redis_tls_url: str,
    kafka_bootstrap: str,
    topic_template: str,
    tmp_path: Path,
) -> None:
    """One node on the Sentinel URL and one on the TLS URL crawl a site each, at once."""

    def crawl(name: str, url: str) -> None:
        def seed() -> None:
            client = sync_client(url)
            client.lpush("pages:start_urls", site.url(0))
            client.close()

        with Site(25) as site:
            crawl_into_kafka(
                1,
                redis_url=url,
                kafka_bootstrap=kafka_bootstrap,
                topic_template=f"{name}-{topic_template}",
                site=site,
                workdir=tmp_path / name,
                seed=seed,
            )
        client = sync_client(url)
        try:
            assert client.scard("{pages}:dupefilter:exact") == 25
            assert (
                int(client.get("{pages}:queue:count") or 0) == client.zcard("{pages}:leases") == 0
            )
        finally:
            client.close()

    with ThreadPoolExecutor(2) as pool:
        crawls = [
            pool.submit(crawl, "sentinel", redis_sentinel_url),
            pool.submit(crawl, "tls", redis_tls_url),
        ]
        for done in crawls:
            done.result()


def test_the_topology_check_speaks_tls_to_a_tls_server(redis_tls_url: str) -> None:
    """The server refuses plain text: an answer about its topology proves the check used the
    URL's TLS (in plain text it sent AUTH unencrypted, failed, and checked nothing)."""
    config = RedisConfig.from_url(redis_tls_url)
    assert topology_problem(config) is None  # a lone server, as the URL says
    as_cluster = replace(config, topology=Topology.CLUSTER)
    assert "names a Redis Cluster, but the server there is not one" in (
        topology_problem(as_cluster) or ""
    )


def test_credentials_the_server_refuses_stop_the_start_naming_the_url(
    own_redis: RedisServer,
) -> None:
    """A wrong or missing password retried for ever, one WARNING per component ("Redis
    unavailable (connection)"), as if Redis were away (an audit): refused at start."""
    port = own_redis.config.port
    client = redis.Redis(port=port)
    client.config_set("requirepass", "s3cret")
    client.close()
    # a wrong password and none at all were said alike, the URL shown without either (an
    # audit): the message says which the URL gave
    for url, gave in (
        (f"redis://127.0.0.1:{port}/0", "the URL gives none"),
        (f"redis://:wrong@127.0.0.1:{port}/0", "the URL gives a password"),
    ):
        problem = topology_problem(RedisConfig.from_url(url)) or ""
        assert f"REDIS_URL=redis://127.0.0.1:{port}/0: the server at 127.0.0.1:{port}" in problem
        assert "refused the URL's credentials" in problem
        assert gave in problem, problem
        assert "wrong" not in problem and "s3cret" not in problem
    assert topology_problem(RedisConfig.from_url(f"redis://:s3cret@127.0.0.1:{port}/0")) is None


def test_a_database_the_server_does_not_have_stops_the_start(own_redis: RedisServer) -> None:
    """``redis://.../99`` of a server of 16 databases: a node was refused with "checking the
    frontier failed: ResponseError: DB index is out of range" and a traceback, `scrapy purge`
    died on the traceback (an audit)."""
    port = own_redis.config.port
    problem = topology_problem(RedisConfig.from_url(f"redis://127.0.0.1:{port}/99")) or ""
    assert f"REDIS_URL=redis://127.0.0.1:{port}/99 names database 99, which the server" in problem
    assert topology_problem(RedisConfig.from_url(f"redis://127.0.0.1:{port}/15")) is None


def test_a_replica_given_as_the_server_stops_the_start(own_redis: RedisServer) -> None:
    """``redis://`` at a replica (a Service over a master and its replicas): the node
    started and waited for ever ("Redis unavailable (readonly)"), and ``crawler status``
    showed the replica's copy as the crawl's (an audit)."""
    port = own_redis.config.port
    client = redis.Redis(port=port)
    client.replicaof("127.0.0.1", "1")  # a master that never answers: a replica all the same
    try:
        problem = topology_problem(RedisConfig.from_url(f"redis://127.0.0.1:{port}/0")) or ""
    finally:
        client.replicaof("NO", "ONE")
        client.close()
    assert "names one server, but the server there is a replica of 127.0.0.1:1" in problem
    assert "redis+sentinel://" in problem
    assert topology_problem(RedisConfig.from_url(f"redis://127.0.0.1:{port}/0")) is None


def test_a_sentinel_given_as_a_server_or_an_unknown_master_name_stops_the_start(
    redis_sentinel_url: str,
) -> None:
    """A server URL at a Sentinel's port started, then failed every command ("unknown
    command 'SCAN'"); a master name the Sentinel does not monitor retried for ever ("No master
    found for 'nosuchmaster'") (an audit)."""
    config = RedisConfig.from_url(redis_sentinel_url)
    host, port = config.hosts[0]
    for db in (0, 3):  # not a check of the database first (a Sentinel has no SELECT)
        as_server = topology_problem(RedisConfig.from_url(f"redis://{host}:{port}/{db}")) or ""
        assert "names one server, but the server there is a Redis Sentinel" in as_server
    assert "redis+sentinel://" in as_server
    unknown = topology_problem(replace(config, service="nosuchmaster")) or ""
    assert "names the master 'nosuchmaster', which the Sentinel at" in unknown
    assert f"does not monitor (it monitors: {config.service})" in unknown
    assert topology_problem(config) is None
