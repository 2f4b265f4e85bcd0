#!/bin/bash
# The container's entrypoint (deploy/Dockerfile). Arguments are a kmirror command line
# (`run --config ...`, `broker ...`, `--help`), except `executor`: that is what Spark on
# Kubernetes passes to the executor pods it starts from the driver's image
# (spark.kubernetes.container.image), and it starts an executor the way Spark's own image
# does (its entrypoint.sh), from the environment Spark gives the pod.
set -euo pipefail

if [ "${1:-}" != executor ]; then
    exec kmirror "$@"
fi
spark_home="${SPARK_HOME:-$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
# Spark hands the executor's JVM options over as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in order.
mapfile -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
exec java "${java_opts[@]}" -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
    -cp "$spark_home/conf:$spark_home/jars/*" org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" --cores "$SPARK_EXECUTOR_CORES" \
    --app-id "$SPARK_APPLICATION_ID" --hostname "$SPARK_EXECUTOR_POD_IP" \
    --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" --podName "$SPARK_EXECUTOR_POD_NAME"
