"""The deploy recipes (deploy/Dockerfile, deploy/entrypoint.sh, deploy/k8s/) checked as far as a
machine with neither Docker nor Kubernetes can: what they copy exists, the entrypoint starts
kmirror and builds Spark's executor command, the manifests parse, and everything they say of
kmirror (flags, config keys, ports, names) matches kmirror and the other manifests.

The image is never built and the manifests never applied here (deploy/README.md says so);
tests/spark/test_standalone_cluster.py is the cluster run that is tested.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mirror.cli import build_parser
from mirror.config import MirrorConfig, load_config
from mirror.options import overrides_from_args

ROOT = Path(__file__).parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"


def _copied() -> list[str]:
    """The sources of the Dockerfile's COPY lines, relative to the build context (the root)."""
    sources = []
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            sources += line.split()[1:-1]
    return sources


def test_the_image_copies_what_the_package_builds_from():
    copied = {source.rstrip("/") for source in _copied()}
    assert all((ROOT / source).exists() for source in copied), copied
    # What the wheel is built from (pyproject.toml, setup.py's package discovery, the package
    # directories, the readme), and the entrypoint.
    assert {"pyproject.toml", "setup.py", "README.md", "codecs", "mirror", "deploy/entrypoint.sh"} <= copied
    unignored = {line[1:].rstrip("/") for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
                 if line.startswith("!")}
    assert unignored == copied  # the build context holds exactly what is copied


def _entrypoint(*args: str, **env: str) -> subprocess.CompletedProcess:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["bash", str(DEPLOY / "entrypoint.sh"), *args], capture_output=True, text=True,
                          env={**os.environ, "PATH": env.pop("PATH", path), **env}, timeout=60)


def test_the_entrypoint_runs_kmirror():
    done = _entrypoint("run", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: kmirror run")


def test_the_entrypoint_starts_a_kubernetes_executor_from_what_spark_gives_the_pod(tmp_path):
    fake_java = tmp_path / "java"
    fake_java.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    fake_java.chmod(0o755)
    pod = {"SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@kmirror-driver.kmirror.svc:7078",
           "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "2", "SPARK_APPLICATION_ID": "spark-app-1",
           "SPARK_EXECUTOR_POD_IP": "10.0.0.7", "SPARK_RESOURCE_PROFILE_ID": "0",
           "SPARK_EXECUTOR_POD_NAME": "kmirror-exec-3", "SPARK_EXECUTOR_MEMORY": "2g",
           "SPARK_JAVA_OPT_10": "-Dlast", "SPARK_JAVA_OPT_0": "-Dfirst=a=b", "SPARK_JAVA_OPT_2": "-Dsecond"}
    done = _entrypoint("executor", PATH=f"{tmp_path}{os.pathsep}/usr/bin{os.pathsep}/bin", SPARK_HOME="/spark", **pod)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "-Dfirst=a=b", "-Dsecond", "-Dlast", "-Xms2g", "-Xmx2g", "-cp", "/spark/conf:/spark/jars/*",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url", pod["SPARK_DRIVER_URL"], "--executor-id", "3", "--cores", "2", "--app-id", "spark-app-1",
        "--hostname", "10.0.0.7", "--resourceProfileId", "0", "--podName", "kmirror-exec-3"]


@pytest.fixture(scope="module")
def k8s() -> dict[str, dict]:
    """Every Kubernetes object of deploy/k8s by kind, and the kustomization."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    objects = {"Kustomization": kustomization}
    for resource in kustomization["resources"]:
        for document in yaml.safe_load_all((K8S / resource).read_text()):
            assert {"apiVersion", "kind", "metadata"} <= document.keys(), resource
            objects[document["kind"]] = document
    return objects


def _driver(k8s: dict[str, dict]) -> tuple[dict, MirrorConfig]:
    """The driver container and the configuration its command line gives kmirror: the
    ConfigMap's file as mounted, with the flags over it."""
    container = k8s["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(container["args"])
    assert args.command == "run"
    generated = k8s["Kustomization"]["configMapGenerator"][0]
    mounted = {mount["mountPath"] for mount in container["volumeMounts"] if mount["name"] == "config"}
    assert str(Path(args.config).parent) in mounted and Path(args.config).name == generated["files"][0]
    return container, load_config(K8S / generated["files"][0], overrides_from_args(args))


def test_the_driver_runs_kmirror_with_the_mounted_configuration_and_valid_flags(k8s):
    container, config = _driver(k8s)
    # Kubernetes expands $(VAR) from the container's environment before kmirror sees it.
    assert set(re.findall(r"\$\((\w+)\)", " ".join(container["args"]))) <= {var["name"] for var in container["env"]}
    assert config.streaming.master.startswith("k8s://") and config.delivery.name
    volumes = {volume["name"]: volume for volume in k8s["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == k8s["Kustomization"]["configMapGenerator"][0]["name"]
    checkpoint = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}["checkpoint"]
    assert Path(config.streaming.checkpoint).is_relative_to(checkpoint)
    assert volumes["checkpoint"]["persistentVolumeClaim"]["claimName"] == \
        k8s["PersistentVolumeClaim"]["metadata"]["name"]


def test_the_spark_settings_agree_with_the_manifests(k8s):
    container, config = _driver(k8s)
    spark = config.streaming.spark_conf
    namespace = k8s["Kustomization"]["namespace"]
    assert spark["spark.kubernetes.namespace"] == namespace == k8s["Namespace"]["metadata"]["name"]
    assert spark["spark.kubernetes.container.image"] == container["image"]
    assert config.streaming.copy_tasks == int(spark["spark.executor.instances"]) * int(spark["spark.executor.cores"])
    pod = k8s["Deployment"]["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == k8s["ServiceAccount"]["metadata"]["name"]
    assert container["envFrom"][0]["secretRef"]["name"] == k8s["Secret"]["metadata"]["name"]
    service = k8s["Service"]
    assert spark["spark.driver.host"] == f"{service['metadata']['name']}.{namespace}.svc"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    ports = {int(spark["spark.driver.port"]), int(spark["spark.driver.blockManager.port"]),
             config.streaming.metrics_port}
    assert ports <= {port["port"] for port in service["spec"]["ports"]}
    container_ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert set(container_ports.values()) == ports
    assert container_ports[container["livenessProbe"]["httpGet"]["port"]] == config.streaming.metrics_port


def test_the_grafana_dashboard_is_what_its_script_builds_from_kmirrors_own_metrics():
    """deploy/grafana/kmirror.json is generated (deploy/grafana/dashboard.py, with Grafana's
    grafana-foundation-sdk), never edited by hand, and queries only metrics kmirror exports
    (docs/metrics.md's table), each panel a query."""
    import importlib.util

    script = Path(__file__).parents[1] / "deploy" / "grafana" / "dashboard.py"
    spec = importlib.util.spec_from_file_location("kmirror_dashboard", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    assert (script.parent / "kmirror.json").read_text() == module.rendered(), \
        "kmirror.json is stale: run python deploy/grafana/dashboard.py"
    exported = set(re.findall(r"^\| `(kmirror_\w+)`", (Path(__file__).parents[1] / "docs" / "metrics.md").read_text(),
                                 re.M))
    board = json.loads((script.parent / "kmirror.json").read_text())
    queries = [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]
    assert len(queries) == len(module.PANELS)
    for query in queries:
        for name in re.findall(r"kmirror_\w+", query):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert base in exported or base.removesuffix("_total") in {e.removesuffix("_total") for e in exported}, \
                f"{query}: {name} is not a metric kmirror exports"


def test_every_alert_rule_uses_kmirrors_metrics_and_is_explained_in_operations_docs():
    root = Path(__file__).parents[1]
    rules = yaml.safe_load((root / "deploy" / "prometheus" / "kmirror-rules.yml").read_text())
    exported = set(re.findall(r"^\| `(kmirror_\w+)`", (root / "docs" / "metrics.md").read_text(), re.M))
    operations = (root / "docs" / "operations.md").read_text()
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    assert {rule["alert"] for rule in alerts} == set(re.findall(r"^\| `(Kmirror\w+)`", operations, re.M))
    for rule in alerts:
        for name in re.findall(r"kmirror_\w+", rule["expr"]):
            assert name in exported, f"{rule['alert']}: {name} is not a metric kmirror exports"
        assert rule["annotations"]["summary"]


def test_the_monitoring_component_scrapes_the_drivers_metrics_port_as_the_rules_job(k8s):
    """deploy/k8s/monitoring: a kustomize Component (optional) whose PodMonitor selects the
    driver's pod by its labels, scrapes the container port the driver serves --metrics-port on,
    and names the scrape job "kmirror", the job the alert rules select."""
    component_dir = K8S / "monitoring"
    component = yaml.safe_load((component_dir / "kustomization.yaml").read_text())
    assert component["kind"] == "Component" and "monitoring" not in k8s["Kustomization"].get("components", [])
    (monitor,) = [yaml.safe_load((component_dir / name).read_text()) for name in component["resources"]]
    assert monitor["kind"] == "PodMonitor"
    template = k8s["Deployment"]["spec"]["template"]
    labels = template["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert labels[monitor["spec"]["jobLabel"]] == "kmirror"
    container, config = _driver(k8s)
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert ports[endpoint["port"]] == config.streaming.metrics_port and endpoint["path"] == "/metrics"
    rules = (DEPLOY / "prometheus" / "kmirror-rules.yml").read_text()
    assert 'job="kmirror"' in rules
