"""deploy/kubernetes: the manifests parse, reference only files that exist, build with
kustomize (``kubectl kustomize`` or ``kustomize build``), and agree with the image (user, port,
volumes, command) and with the project's settings (every variable is one the project reads,
and the values resolve and validate as a node would read them)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from scrapy.settings import Settings, default_settings

from crawler.redis_url import RedisConfig
from settings import base
from settings.resolve import ENV_OVERRIDES, PROFILE_ENV, SETTING_PREFIX, resolve_settings
from tests.dockerfile import (
    REPO_ROOT,
    dockerfile_args,
    exec_form,
    image_env,
    image_uid,
    image_user,
    image_volumes,
)
from tests.services import unavailable
from tests.stop_budget import stop_budget

KUBERNETES = REPO_ROOT / "deploy" / "kubernetes"
KUSTOMIZATIONS = sorted(path.parent for path in KUBERNETES.rglob("kustomization.yaml"))
BUILDS = [str(path.relative_to(KUBERNETES)) for path in KUSTOMIZATIONS]
KNOWN_SETTINGS = {name for name in dir(base) + dir(default_settings) if name.isupper()}


def documents(path: Path) -> list[dict[str, Any]]:
    loaded = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    assert all(isinstance(doc, dict) for doc in loaded), path
    return loaded


def kustomize_command() -> list[str]:
    """``kubectl kustomize``, else the ``kustomize`` binary ``make setup`` builds into .venv/bin
    with Go when there is no kubectl."""
    if shutil.which("kubectl") is not None:
        return ["kubectl", "kustomize"]
    for binary in (shutil.which("kustomize"), REPO_ROOT / ".venv" / "bin" / "kustomize"):
        if binary is not None and Path(binary).is_file():
            return [str(binary), "build"]
    unavailable("neither kubectl nor kustomize is installed (make setup builds kustomize)")


@functools.cache
def built(kustomization: str) -> tuple[dict[str, Any], ...]:
    """The objects kustomize renders for a kustomization folder."""
    done = subprocess.run(
        [*kustomize_command(), str(KUBERNETES / kustomization)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr  # no deprecated kustomize fields
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def one(objects: tuple[dict[str, Any], ...], kind: str) -> dict[str, Any]:
    (found,) = [obj for obj in objects if obj["kind"] == kind]
    return found


def container(objects: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    (node,) = one(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"]
    assert isinstance(node, dict)
    return node


def environment(objects: tuple[dict[str, Any], ...]) -> dict[str, str]:
    """What a node's environment holds: the image's ENV, then the ConfigMap and Secret."""
    config = one(objects, "ConfigMap").get("data") or {}
    secret = one(objects, "Secret").get("stringData") or {}
    return {**image_env(), **config, **secret}


def test_every_manifest_parses_as_kubernetes_objects() -> None:
    manifests = sorted(KUBERNETES.rglob("*.yaml"))
    assert len(manifests) >= 8
    for path in manifests:
        for doc in documents(path):
            assert {"apiVersion", "kind"} <= set(doc), f"{path}: {doc}"
            if doc["kind"] != "Kustomization":
                assert doc["metadata"]["name"], path


@pytest.mark.parametrize("folder", KUSTOMIZATIONS, ids=BUILDS)
def test_kustomizations_reference_only_files_that_exist(folder: Path) -> None:
    (kustomization,) = documents(folder / "kustomization.yaml")
    references = [*kustomization.get("resources", [])]
    references += [patch["path"] for patch in kustomization.get("patches", [])]
    assert references
    for reference in references:
        target = folder / reference
        assert target.is_file() or (target / "kustomization.yaml").is_file(), target
    listed = {(folder / ref).resolve() for ref in references}
    unused = {p.resolve() for p in folder.glob("*.yaml")} - listed - {folder / "kustomization.yaml"}
    assert not unused, f"files no kustomization uses: {sorted(unused)}"


@pytest.mark.parametrize("kustomization", BUILDS)
def test_every_variable_is_one_the_project_reads(kustomization: str) -> None:
    objects = built(kustomization)
    names = set(environment(objects)) - set(image_env())
    names |= {variable["name"] for variable in container(objects).get("env", [])}
    for name in names:
        prefixed = name.startswith(SETTING_PREFIX)
        known = name in ENV_OVERRIDES or name == PROFILE_ENV
        assert known or (prefixed and name.removeprefix(SETTING_PREFIX) in KNOWN_SETTINGS), name


@pytest.mark.parametrize("kustomization", BUILDS)
def test_the_environment_resolves_to_valid_settings(kustomization: str) -> None:
    settings = Settings(resolve_settings(environment(built(kustomization))))
    assert settings["CRAWLER_PROFILE"] == "prod"
    RedisConfig.from_url(settings["REDIS_URL"])  # raises ValueError naming REDIS_URL
    assert settings["KAFKA_BOOTSTRAP_SERVERS"]
    settings.getdict("KAFKA_PRODUCER_CONFIG")  # JSON where an overlay sets it
    settings.getdict("KAFKA_TOPIC_CONFIG")


@pytest.mark.parametrize("kustomization", BUILDS)
def test_pods_run_the_image_as_its_user_on_its_port_and_volumes(kustomization: str) -> None:
    objects = built(kustomization)
    pod = one(objects, "StatefulSet")["spec"]["template"]["spec"]
    uid = image_uid(image_user())
    context = pod["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == context["runAsGroup"] == context["fsGroup"] == uid
    node = container(objects)
    assert node["args"] == exec_form(dockerfile_args("CMD")[-1])
    (port,) = node["ports"]
    assert str(port["containerPort"]) == image_env()["CRAWLER_SETTING_METRICS_PORTS"]
    mounts = {mount["mountPath"] for mount in node["volumeMounts"]}
    assert set(image_volumes()) <= mounts, "every path the image writes needs a volume"
    claims = one(objects, "StatefulSet")["spec"]["volumeClaimTemplates"]
    assert {volume["name"] for volume in pod["volumes"]} | {
        claim["metadata"]["name"] for claim in claims
    } == {mount["name"] for mount in node["volumeMounts"]}


@pytest.mark.parametrize("kustomization", BUILDS)
def test_each_node_s_spool_outlives_its_pod(kustomization: str) -> None:
    """The spool was an emptyDir: a pod deleted while Kafka was down took the items it had
    spooled (their pages acknowledged) with it (an audit). A volume per pod, kept when the pod
    goes or the set shrinks, comes back with the pod's name, its node id."""
    nodes = one(built(kustomization), "StatefulSet")["spec"]
    (claim,) = nodes["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "spool"
    assert "spool" not in {volume["name"] for volume in nodes["template"]["spec"]["volumes"]}
    assert nodes["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    assert nodes["serviceName"] == one(built(kustomization), "Service")["metadata"]["name"]
    (node,) = nodes["template"]["spec"]["containers"]
    (from_env,) = [v for v in node["env"] if v["name"] == "CRAWLER_NODE_ID"]
    assert from_env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


@pytest.mark.parametrize("kustomization", BUILDS)
def test_probes_ask_healthz_and_readyz_on_the_metrics_port(kustomization: str) -> None:
    node = container(built(kustomization))
    (port,) = node["ports"]
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert node[probe]["httpGet"] == {"path": path, "port": port["name"]}, probe


@pytest.mark.parametrize("kustomization", BUILDS)
def test_an_init_process_reaps_the_browsers_children(kustomization: str) -> None:
    """The image has no init: as PID 1 the node would leave Chromium's exited children as
    zombies. The pod's own init (the pause process, PID 1 in a shared process namespace)
    reaps them, as Compose's ``init: true`` does."""
    assert dockerfile_args("ENTRYPOINT") == []
    pod = one(built(kustomization), "StatefulSet")["spec"]["template"]["spec"]
    assert pod.get("shareProcessNamespace") is True


@pytest.mark.parametrize("kustomization", BUILDS)
def test_termination_grace_covers_downloads_kafka_flush_and_returning_leases(
    kustomization: str,
) -> None:
    objects = built(kustomization)
    needed = stop_budget(environment(objects))
    grace = one(objects, "StatefulSet")["spec"]["template"]["spec"]
    assert grace["terminationGracePeriodSeconds"] >= needed + 10, needed


@pytest.mark.parametrize("kustomization", BUILDS)
def test_the_budget_and_the_service_select_the_nodes(kustomization: str) -> None:
    objects = built(kustomization)
    labels = one(objects, "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    budget = one(objects, "PodDisruptionBudget")["spec"]
    assert budget["maxUnavailable"] == 1
    selectors = [budget["selector"]["matchLabels"], one(objects, "Service")["spec"]["selector"]]
    for selector in selectors:
        assert selector.items() <= labels.items(), selector
    (service_port,) = one(objects, "Service")["spec"]["ports"]
    assert service_port["targetPort"] == container(objects)["ports"][0]["name"]
    image = container(objects)["image"]  # kustomization's images: the Dockerfile's image
    assert image.rsplit(":", 1)[0].endswith("/distributed-crawler"), image


def test_the_cluster_overlay_points_at_a_redis_cluster_and_three_brokers() -> None:
    env = environment(built("overlays/redis-cluster-kafka-cluster"))
    assert RedisConfig.from_url(env["REDIS_URL"]).topology == "cluster"
    assert len(env["KAFKA_BOOTSTRAP_SERVERS"].split(",")) == 3
    assert env["CRAWLER_SETTING_KAFKA_TOPIC_REPLICATION"] == "3"
