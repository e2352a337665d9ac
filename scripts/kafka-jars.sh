#!/usr/bin/env bash
# Download the Apache Kafka broker runtime classpath from Maven Central into <dest-dir>.
#
#   scripts/kafka-jars.sh <dest-dir>
#
# Result:
#   <dest-dir>/*.jar                 the broker's runtime classpath (java -cp '<dest-dir>/*')
#   <dest-dir>/.complete             marker written last; its presence means "done"
#   <dest-dir>/../log4j2.properties  log4j2 config (console appender, INFO)
#
# Idempotent: exits at once when <dest-dir>/.complete exists. Jars are resolved into a
# temporary directory next to <dest-dir> and moved into place only when complete, so an
# interrupted download never looks finished. Needs `mvn` (Apache Maven) and network access
# to Maven Central (or a mirror configured in ~/.m2/settings.xml).
set -euo pipefail

KAFKA_VERSION="4.4.0"  # keep in sync with crawler/devservices/jars.py
# log4j-core version that kafka_2.13:4.4.0 pulls in (via kafka-server). Kafka logs through
# SLF4J 1.x (slf4j-api 1.7.x), so it needs the log4j-slf4j-impl binding of the same version;
# without it the broker prints nothing at all.
LOG4J_VERSION="2.25.5"

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 <dest-dir>" >&2
    exit 2
fi

dest="$1"
if [[ -f "$dest/.complete" ]]; then
    exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
    echo "kafka-jars.sh: 'mvn' (Apache Maven) is required to download the Kafka jars" >&2
    exit 1
fi

parent="$(dirname "$dest")"
mkdir -p "$parent"

# Serialise concurrent runs (two test sessions starting at once) on a lock file.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$parent/.kafka-jars.lock"
    flock 9
    if [[ -f "$dest/.complete" ]]; then
        exit 0
    fi
fi

workdir="$(mktemp -d)"
staging="$(mktemp -d "$parent/.libs-download.XXXXXX")"
cleanup() {
    rm -rf "$workdir" "$staging"
}
trap cleanup EXIT

cat >"$workdir/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.distributed-crawler</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
POM

echo "kafka-jars.sh: resolving kafka_2.13:${KAFKA_VERSION} + log4j-slf4j-impl:${LOG4J_VERSION} into $dest" >&2
# Maven's output is only shown when it fails (mvn 3.8 prints stray colour codes even with -q).
if ! mvn -B -q -Dstyle.color=never -f "$workdir/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$staging" >"$workdir/mvn.log" 2>&1; then
    cat "$workdir/mvn.log" >&2
    echo "kafka-jars.sh: mvn dependency:copy-dependencies failed" >&2
    exit 1
fi

if ! compgen -G "$staging/kafka_2.13-${KAFKA_VERSION}.jar" >/dev/null; then
    echo "kafka-jars.sh: maven finished but kafka_2.13-${KAFKA_VERSION}.jar is missing" >&2
    exit 1
fi

cat >"$staging/log4j2.properties" <<'PROPS'
# Written by scripts/kafka-jars.sh: everything at INFO to stdout (the launcher redirects
# the broker's stdout to <data_dir>/broker.log).
status = warn
name = devservices-kafka

appender.console.type = Console
appender.console.name = STDOUT
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n

rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT

# Quieter noisy loggers (AbstractConfig dumps every config object, ~250 lines each).
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.kafka_request.name = kafka.request.logger
logger.kafka_request.level = WARN
logger.state_change.name = state.change.logger
logger.state_change.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
PROPS
mv -f "$staging/log4j2.properties" "$parent/log4j2.properties"

chmod 755 "$staging"
touch "$staging/.complete"
# Replace any leftover partial dest (no .complete marker) with the finished download.
rm -rf "$dest"
mv "$staging" "$dest"
echo "kafka-jars.sh: $(find "$dest" -name '*.jar' | wc -l) jars in $dest" >&2
