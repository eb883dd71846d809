# Sourced by the venv's PySpark launchers (their find-spark-home; `make spark-home` adds the line):
# the driver JVM of `.venv/bin/spark-submit` is as quiet as a local job's (log4j2-quiet.properties:
# no INFO lines).  Options already in SPARK_SUBMIT_OPTS stay; a log4j configuration named there wins.
case " ${SPARK_SUBMIT_OPTS:-} " in
  *log4j2.configurationFile=*|*log4j.configuration=*) ;;
  *) SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:+$SPARK_SUBMIT_OPTS }-Dlog4j2.configurationFile=file:$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/log4j2-quiet.properties"
     export SPARK_SUBMIT_OPTS ;;
esac
