#!/usr/bin/env bash
# Install what the crawler, `make demo` and `make test` need on a fresh Debian machine:
# Debian packages (Redis, kcat, Chromium, Java, Maven, Prometheus), the virtualenv in .venv
# with the project and its dev extras, the Kafka broker jars (cached in ~/.cache) and, without
# kubectl, kustomize (built with Go into .venv/bin). Idempotent:
# a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
# command -> Debian package providing it
declare -A PACKAGES=(
    [redis-server]=redis-server
    [redis-cli]=redis-tools
    [kcat]=kcat
    [chromium]=chromium
    [java]=openjdk-17-jre-headless
    [mvn]=maven
    [promtool]=prometheus  # promtool and the server, for the alert and dashboard tests
)

missing=()
for command in "${!PACKAGES[@]}"; do
    command -v "$command" >/dev/null 2>&1 || missing+=("${PACKAGES[$command]}")
done
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}" >&2
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

if [[ ! -x .venv/bin/python ]]; then
    if ! "$PYTHON" -c "import ensurepip" >/dev/null 2>&1; then  # Debian's venv needs it
        echo "setup: installing Debian package python3-venv" >&2
        sudo=()
        [[ $(id -u) -eq 0 ]] || sudo=(sudo)
        "${sudo[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
            --no-install-recommends python3-venv >/dev/null
    fi
    echo "setup: creating .venv" >&2
    "$PYTHON" -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
    echo "setup: installing Python packages into .venv" >&2
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[dev,containers]"
    rm -f .venv/.installed-*
    touch "$stamp"
fi

# kustomize for the Kubernetes manifest tests: kubectl carries it; else built with Go
# (the module proxy) into .venv/bin, once.
KUSTOMIZE_VERSION=v5.7.1  # the newest that builds with Go 1.26
kustomize="kustomize"
if ! command -v kubectl >/dev/null 2>&1 && [[ ! -x .venv/bin/kustomize ]]; then
    if command -v go >/dev/null 2>&1; then
        echo "setup: building kustomize $KUSTOMIZE_VERSION with Go into .venv/bin" >&2
        if ! GOBIN="$PWD/.venv/bin" go install \
            "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"; then
            kustomize="no kustomize"  # Debian's golang-go (1.19) is too old to build it
            echo "setup: WARNING: $(go version) could not build kustomize (Go 1.22 or newer," \
                "https://go.dev/dl, or kubectl): the Kubernetes manifest tests need it (make" \
                "demo does not); install one and run make setup again" >&2
        fi
    else
        kustomize="no kustomize"
        echo "setup: WARNING: neither kubectl nor Go (1.22 or newer, https://go.dev/dl) is" \
            "installed: the Kubernetes manifest tests need one of them for kustomize (make demo" \
            "does not); install one and run make setup again" >&2
    fi
fi

.venv/bin/python -c "from crawler.devservices import ensure_kafka_jars; ensure_kafka_jars()"
echo "setup: ready (.venv, redis-server, Kafka jars, chromium, prometheus, $kustomize)" >&2
