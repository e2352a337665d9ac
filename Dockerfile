# Crawler node image: one `scrapy crawl` process per container.
#
# Build:  docker build -t distributed-crawler .
# Run:    docker compose up -d --scale crawler=3   (see docker-compose.yml)
#
# Layers are ordered from least to most frequently changed: OS packages, then the
# third-party dependencies (rebuilt only when pyproject.toml changes), then our code.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Debian's Chromium (/usr/bin/chromium) for the browser-rendering feature that will
# drive it through Playwright; fonts so rendered pages have glyphs.
RUN apt-get update \
    && apt-get install -y --no-install-recommends chromium fonts-liberation \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 crawler \
    && useradd --system --uid 10001 --gid crawler \
        --home-dir /home/crawler --create-home --shell /usr/sbin/nologin crawler

WORKDIR /app

# Dependencies only: read [project].dependencies from pyproject.toml and install them,
# so editing the code below does not reinstall Scrapy, Playwright, confluent-kafka...
# (README.m[d] is a wildcard so the COPY still works while README.md does not exist.)
COPY pyproject.toml README.m[d] ./
RUN python -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; open('/tmp/requirements.txt', 'w').write('\n'.join(deps) + '\n')" \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The project itself (packages + Scrapy project file); dependencies are already there.
COPY scrapy.cfg ./
COPY settings ./settings
COPY crawler ./crawler
# /app stays root's: the node writes only to its Kafka spool (KAFKA_SPOOL_DIR "spool",
# relative to /app; the dead-letter file is in it too) and Scrapy's .scrapy folder, both
# owned by `crawler` and volumes (a named volume starts with this ownership).
RUN pip install --no-deps . \
    && rm -rf build ./*.egg-info \
    && mkdir -p /app/spool /app/.scrapy \
    && chown crawler:crawler /app/spool /app/.scrapy

# Metrics and /healthz on the container's interface, on one fixed port (9410) that the
# HEALTHCHECK, Prometheus and Kubernetes probes use; outside containers METRICS_HOST is
# 127.0.0.1.
ENV CRAWLER_PROFILE=prod \
    METRICS_HOST=0.0.0.0 \
    CRAWLER_SETTING_METRICS_PORTS=9410

VOLUME ["/app/spool", "/app/.scrapy"]

USER crawler

EXPOSE 9410

# /healthz answers 200 while the node runs (with what Redis and Kafka say); no curl in
# the slim image, so Python asks.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9410/healthz', timeout=4)"]

# Scrapy stops gracefully on SIGTERM (Docker's default stop signal); give it time to
# hand in-flight requests back to the frontier (compose sets stop_grace_period: 120s).
CMD ["scrapy", "crawl", "pages"]
