"""Where the warehouse and the binlogs live, configured once, the Spark way.

Spark's own reads (listing, ``binaryFile``, delta-spark) take object-store and HDFS settings from
Hadoop's configuration: ``core-site.xml``, ``spark.hadoop.fs.s3a.*`` in the Spark settings, or
``--conf``. The pipeline's other readers and writers (pyarrow in the bronze tasks and in
maintenance, delta-rs on the driver, obstore for the warehouse lock) read the same settings
from here, so one configuration serves every component:

* :class:`StorageSettings`: a frozen, picklable value holding the Hadoop options that matter
  (``fs.s3a.*``, with the per-bucket ``fs.s3a.bucket.<bucket>.*`` overrides, and the HDFS client
  options). Built from a live SparkSession (:func:`from_spark`: the JVM's Hadoop configuration,
  so ``core-site.xml`` and ``spark.hadoop.*`` both count) or from the configuration file's
  ``spark.conf`` and ``$HADOOP_CONF_DIR`` (:func:`from_spark_conf`, for tools that start no session).
* :func:`current` / :func:`use`: the process's settings. :func:`pipelines.spark_session.build_session`
  sets them from the session it returns; ``pipelines.sql`` and ``pipelines.quarantine`` from the
  configuration. Spark tasks run in other processes: the bronze tasks get the value in their
  closures and pass it explicitly (nothing here reads ``spark.executorEnv``).
* One function per derived form: :func:`s3_options` (one bucket's settings, the only place that
  reads Hadoop's key names), :func:`delta_storage_options` (delta-rs), :func:`arrow_filesystem`
  (pyarrow), :func:`object_store` (obstore, for the lock), :func:`hdfs_client` (hdfs-native).

Hadoop's S3A options and what they become (``fs.s3a.bucket.<bucket>.<option>`` wins over
``fs.s3a.<option>`` for that bucket):

====================================  ==================================  ===========================
Hadoop option                         delta-rs / obstore                  pyarrow ``S3FileSystem``
====================================  ==================================  ===========================
``access.key``, ``secret.key``        ``aws_access_key_id``, ...secret... ``access_key``, ``secret_key``
``session.token``                     ``aws_session_token``               ``session_token``
``endpoint`` (``host[:port]`` or a    ``aws_endpoint`` (a URL),           ``endpoint_override``,
URL; ``connection.ssl.enabled=false`` ``aws_allow_http``                  ``scheme``
means http)
``endpoint.region`` (or ``region``)   ``aws_region``                      ``region``
``path.style.access``                 ``aws_virtual_hosted_style_request`` ``force_virtual_addressing``
``aws.credentials.provider`` naming   ``aws_skip_signature``              ``anonymous``
``AnonymousAWSCredentialsProvider``
====================================  ==================================  ===========================

When the options name no keys, each library looks for credentials the standard AWS way itself
(``AWS_*`` environment variables, ``~/.aws``, the instance profile). Secrets in Hadoop credential
providers (JCEKS files) are not read here: name the keys in the options, or use the AWS chain.

HDFS (``hdfs://namenode:port/...``) goes through hdfs-native (Rust, no JVM, no libhdfs): delta-rs
has it inside, pyarrow gets it wrapped as a filesystem. The HDFS client options of the Hadoop
configuration (``fs.defaultFS``, ``dfs.nameservices``, ``dfs.ha.namenodes.*``, ...) go to it, and
hdfs-native also reads ``$HADOOP_CONF_DIR`` itself.

URIs keep their scheme: deltalake 1.6 opens ``s3a://`` itself, as ``s3://``, and gives its file
URIs back as ``s3a://``, which Spark's S3A then reads; pyarrow and obstore get the bucket and key.
(``s3n://``, which Hadoop 3 removed, is read as S3 by pyarrow and obstore; delta-rs refuses it.)

>>> s = StorageSettings.of({"fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK",
...                         "fs.s3a.endpoint": "127.0.0.1:9000", "fs.s3a.path.style.access": "true",
...                         "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.bucket.logs.access.key": "AK2"})
>>> opts = delta_storage_options("s3a://data/wh", s)
>>> opts["aws_access_key_id"], opts["aws_endpoint"], opts["aws_allow_http"]
('AK', 'http://127.0.0.1:9000', 'true')
>>> delta_storage_options("s3a://logs/binlogs", s)["aws_access_key_id"]
'AK2'
>>> delta_storage_options("/data/wh", s) is None
True
>>> s
StorageSettings(6 option(s): fs.s3a.access.key=***, fs.s3a.bucket.logs.access.key=***, ...)
"""
from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlparse
from pipelines.errors import PipelineError

S3_SCHEMES = ("s3", "s3a", "s3n")
HDFS_SCHEMES = ("hdfs",)
SPARK_HADOOP_PREFIX = "spark.hadoop."

# The S3A options read here (each also as fs.s3a.bucket.<bucket>.<option>), and the HDFS client
# options that find the namenode(s) and talk to them: the settings keep only these, not the
# hundred defaults of core-default.xml. (A Java regex for getValByRegex, and a Python one.)
S3A_OPTIONS = ("access.key", "secret.key", "session.token", "endpoint", "connection.ssl.enabled",
               "endpoint.region", "region", "path.style.access", "aws.credentials.provider")
HDFS_OPTIONS = r"fs\.defaultFS|dfs\.nameservices|dfs\.ha\.namenodes\..+|dfs\.namenode\.rpc-address(\..+)?" \
               r"|dfs\.client\.failover\..+|hadoop\.security\.authentication|hadoop\.rpc\.protection" \
               r"|dfs\.data\.transfer\.protection"
HADOOP_OPTIONS = (r"^(fs\.s3a\.(bucket\..+\.)?(" + "|".join(re.escape(o) for o in S3A_OPTIONS) + ")|"
                  + HDFS_OPTIONS + ")$")
_KEPT = re.compile(HADOOP_OPTIONS)
_SECRET = re.compile(r"(secret|token|access\.key|password)", re.I)
_ANONYMOUS_PROVIDER = "AnonymousAWSCredentialsProvider"
_AWS_ENDPOINT = re.compile(r"^s3[.-]([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$")  # s3.eu-west-1.amazonaws.com


class StorageError(PipelineError, ValueError):
    """A storage URI or setting that cannot be used (the message says which and why)."""


@dataclass(frozen=True)
class StorageSettings:
    """The Hadoop options of object stores and HDFS, as ``(key, value)`` pairs sorted by key:
    plain, hashable, picklable (Spark ships it to tasks in their closures). Its ``repr`` hides
    secrets. Build it with :meth:`of`, :func:`from_spark` or :func:`from_spark_conf`.

    >>> StorageSettings.of({"fs.s3a.endpoint": "minio:9000", "spark.sql.shuffle.partitions": "4"}).hadoop
    (('fs.s3a.endpoint', 'minio:9000'),)
    """

    hadoop: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, options: Mapping[str, str]) -> "StorageSettings":
        """The settings in Hadoop ``options`` (other keys, and empty values, are left out)."""
        kept = {str(k): str(v).strip() for k, v in options.items() if _KEPT.match(str(k))}
        return cls(tuple(sorted((k, v) for k, v in kept.items() if v)))

    def get(self, key: str) -> str | None:
        """One Hadoop option's value, or None.

        >>> StorageSettings.of({"fs.s3a.endpoint": "minio:9000"}).get("fs.s3a.endpoint")
        'minio:9000'
        """
        return dict(self.hadoop).get(key)

    def __repr__(self) -> str:
        shown = [f"{k}={'***' if _SECRET.search(k) else v}" for k, v in self.hadoop]
        more = ", ..." if len(shown) > 2 else ""
        return f"StorageSettings({len(shown)} option(s)" + (": " + ", ".join(shown[:2]) + more if shown else "") + ")"


NO_SETTINGS = StorageSettings()


# -- the process's settings -----------------------------------------------------------------

_current: list[StorageSettings] = [NO_SETTINGS]
_current_lock = threading.Lock()


def current() -> StorageSettings:
    """The settings of this process (:func:`use`); none set: every library's own defaults."""
    return _current[0]


def use(settings: StorageSettings) -> StorageSettings:
    """Make ``settings`` this process's (the session builder does, once per session; the
    tools without a session, from the configuration). Returns them."""
    if not isinstance(settings, StorageSettings):
        raise TypeError(f"use() takes StorageSettings, got {type(settings).__name__}")
    with _current_lock:
        _current[0] = settings
    return settings


def from_spark(spark) -> StorageSettings:
    """The settings of a live SparkSession's Hadoop configuration (the driver JVM's: the
    ``core-site.xml`` it found and every ``spark.hadoop.*`` setting). A session without a JVM
    (Spark Connect) gives none."""
    context = getattr(spark, "sparkContext", None) if getattr(spark, "_jvm", None) is not None else None
    if context is None:
        return NO_SETTINGS
    found = context._jsc.hadoopConfiguration().getValByRegex(HADOOP_OPTIONS)
    return StorageSettings.of({str(k): str(v) for k, v in dict(found).items()})


def from_spark_conf(conf: Mapping[str, str], hadoop_conf_dir: str | None = None) -> StorageSettings:
    """The settings a session built with Spark settings ``conf`` would have, for tools that start
    no session: ``core-site.xml`` and ``hdfs-site.xml`` of ``hadoop_conf_dir`` (default:
    ``$HADOOP_CONF_DIR``, as Spark finds them), then ``spark.hadoop.<option>`` of ``conf`` (e.g. a
    configuration file's ``spark.conf``), which win.

    >>> from_spark_conf({"spark.hadoop.fs.s3a.endpoint": "minio:9000", "spark.ui.enabled": "false"}, "").hadoop
    (('fs.s3a.endpoint', 'minio:9000'),)
    """
    folder = os.environ.get("HADOOP_CONF_DIR", "") if hadoop_conf_dir is None else hadoop_conf_dir
    options: dict[str, str] = {}
    for name in ("core-site.xml", "hdfs-site.xml"):
        options.update(_hadoop_xml(os.path.join(folder, name)) if folder else {})
    options.update({k[len(SPARK_HADOOP_PREFIX):]: v for k, v in conf.items() if k.startswith(SPARK_HADOOP_PREFIX)})
    return StorageSettings.of(options)


def _hadoop_xml(path: str) -> dict[str, str]:
    """The ``<property><name>/<value>`` pairs of a Hadoop configuration file (none when it is
    missing; a file that is not XML raises :class:`StorageError` naming it)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        return {}
    except ET.ParseError as e:
        raise StorageError(f"{path}: not a Hadoop configuration file: {e}") from None
    return {p.findtext("name", "").strip(): (p.findtext("value") or "").strip() for p in root.iter("property")}


# -- URIs -----------------------------------------------------------------------------------


def scheme(uri: str) -> str:
    """The URI's scheme, lower case; ``""`` for a plain local path (``file`` for ``file:``).

    >>> scheme("s3a://b/k"), scheme("/data/wh"), scheme("file:///data/wh"), scheme("HDFS://nn/x")
    ('s3a', '', 'file', 'hdfs')
    """
    text = str(uri)
    if re.match(r"^[A-Za-z]:[\\/]", text):  # a Windows drive letter
        return ""
    return urlparse(text).scheme.lower()


def local_path(uri: str) -> str | None:
    """The local path of a plain path or ``file:`` URI (absolute); None for any other scheme.

    >>> local_path("file:///data/wh"), local_path("s3a://b/wh")
    ('/data/wh', None)
    """
    kind = scheme(uri)
    if kind == "file":
        return os.path.abspath(unquote(urlparse(str(uri)).path))
    return os.path.abspath(str(uri)) if kind == "" else None


def is_remote(uri: str) -> bool:
    """True for anything but a local path or ``file:`` URI.

    >>> is_remote("s3a://b/wh"), is_remote("/data/wh")
    (True, False)
    """
    return local_path(uri) is None


def _bucket_and_key(uri: str) -> tuple[str, str]:
    u = urlparse(str(uri))
    if not u.netloc:
        raise StorageError(f"{uri}: an S3 URI needs a bucket (s3a://bucket/path)")
    return u.netloc, unquote(u.path).lstrip("/")


# -- S3: one bucket's settings ------------------------------------------------------------------


@dataclass(frozen=True)
class S3Options:
    """What one bucket's Hadoop S3A options say, in plain terms (None: not set, the library's
    default or the AWS chain decides). ``endpoint`` is a URL with its scheme."""

    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    endpoint: str | None = None
    region: str | None = None
    path_style: bool = False
    anonymous: bool = False

    def __repr__(self) -> str:  # (no secrets in logs)
        keys = "keys" if self.access_key else ("anonymous" if self.anonymous else "AWS chain")
        return f"S3Options({keys}, endpoint={self.endpoint}, region={self.region}, path_style={self.path_style})"


def _true(text: str | None, default: bool) -> bool:
    return default if text is None else text.strip().lower() == "true"


def s3_options(bucket: str, settings: StorageSettings | None = None) -> S3Options:
    """The S3A options of ``bucket`` (its ``fs.s3a.bucket.<bucket>.*`` overrides first): the one
    place that reads Hadoop's S3A key names.

    >>> s = StorageSettings.of({"fs.s3a.endpoint": "minio:9000", "fs.s3a.endpoint.region": "eu-1",
    ...                         "fs.s3a.bucket.b.endpoint": "http://other:9000"})
    >>> s3_options("a", s).endpoint, s3_options("a", s).region, s3_options("b", s).endpoint
    ('https://minio:9000', 'eu-1', 'http://other:9000')
    >>> s3_options("c", StorageSettings.of({"fs.s3a.endpoint": "s3.eu-west-3.amazonaws.com"})).region
    'eu-west-3'
    """
    options = dict((settings or current()).hadoop)

    def opt(name: str) -> str | None:
        return options.get(f"fs.s3a.bucket.{bucket}.{name}") or options.get(f"fs.s3a.{name}")

    endpoint = opt("endpoint")
    if endpoint and "://" not in endpoint:
        endpoint = ("https://" if _true(opt("connection.ssl.enabled"), True) else "http://") + endpoint
    provider = opt("aws.credentials.provider") or ""
    aws_region = _AWS_ENDPOINT.match(urlparse(endpoint).hostname or "") if endpoint else None
    return S3Options(
        access_key=opt("access.key"), secret_key=opt("secret.key"), session_token=opt("session.token"),
        endpoint=endpoint.rstrip("/") if endpoint else None,
        region=opt("endpoint.region") or opt("region") or (aws_region.group(1) if aws_region else None),
        path_style=_true(opt("path.style.access"), False),
        anonymous=_ANONYMOUS_PROVIDER in provider and not opt("access.key"),
    )


def _virtual_host_endpoint(endpoint: str, bucket: str) -> str:
    """``https://bucket.host:port``: how S3A addresses a bucket on an endpoint without path style."""
    u = urlparse(endpoint)
    return f"{u.scheme}://{bucket}.{u.netloc}{u.path}"


# -- the derived forms ------------------------------------------------------------------------


def hdfs_config(settings: StorageSettings | None = None) -> dict[str, str]:
    """The HDFS client options among the settings (for hdfs-native: delta-rs and pyarrow).

    >>> hdfs_config(StorageSettings.of({"dfs.nameservices": "ns", "fs.s3a.endpoint": "x", "fs.defaultFS": "file:///"}))
    {'dfs.nameservices': 'ns'}
    """
    return {k: v for k, v in (settings or current()).hadoop
            if not k.startswith("fs.s3a.") and not (k == "fs.defaultFS" and not v.startswith("hdfs:"))}


def delta_storage_options(uri: str, settings: StorageSettings | None = None) -> dict[str, str] | None:
    """delta-rs's ``storage_options`` for the table at ``uri`` (object_store's keys; the same
    keys serve obstore, :func:`object_store`); None where delta-rs needs none (local paths,
    and S3 or HDFS when no option is set: the library's defaults and the AWS chain decide).

    >>> delta_storage_options("s3a://b/wh", StorageSettings.of({"fs.s3a.endpoint": "h:9", "fs.s3a.path.style.access": "true"}))
    {'aws_endpoint': 'https://h:9', 'aws_region': 'us-east-1', 'aws_virtual_hosted_style_request': 'false'}
    """
    kind = scheme(uri)
    settings = settings or current()
    if kind in HDFS_SCHEMES:
        return hdfs_config(settings) or None
    if kind not in S3_SCHEMES:
        return None
    bucket, _key = _bucket_and_key(uri)
    s3 = s3_options(bucket, settings)
    out: dict[str, str] = {}
    if s3.access_key:
        out["aws_access_key_id"] = s3.access_key
        out["aws_secret_access_key"] = s3.secret_key or ""
        if s3.session_token:
            out["aws_session_token"] = s3.session_token
    elif s3.anonymous:
        out["aws_skip_signature"] = "true"
    if s3.region:
        out["aws_region"] = s3.region
    if s3.endpoint:
        # object_store takes the bucket inside the endpoint when it addresses buckets by host
        out["aws_endpoint"] = s3.endpoint if s3.path_style else _virtual_host_endpoint(s3.endpoint, bucket)
        if s3.endpoint.startswith("http://"):
            out["aws_allow_http"] = "true"
        if s3.region is None:
            out["aws_region"] = "us-east-1"  # (a private endpoint: object_store needs some region to sign)
    if s3.endpoint or s3.path_style:
        out["aws_virtual_hosted_style_request"] = "false" if s3.path_style else "true"
    return out or None


def arrow_filesystem(uri: str, settings: StorageSettings | None = None):
    """``(pyarrow filesystem, path in it)`` of a local path or a URI: ``LocalFileSystem`` for
    local paths and ``file:`` URIs, ``S3FileSystem`` (the bucket's settings) for
    ``s3``/``s3a``/``s3n``, hdfs-native wrapped for pyarrow for ``hdfs``; other schemes as
    pyarrow itself opens them. Filesystems are kept per settings and bucket (or namenode).

    >>> fs, path = arrow_filesystem("file:///data/wh")
    >>> type(fs).__name__, path
    ('LocalFileSystem', '/data/wh')
    """
    from pyarrow import fs as pafs

    local = local_path(uri)
    if local is not None:
        return pafs.LocalFileSystem(), local
    kind, settings = scheme(uri), settings or current()
    if kind in S3_SCHEMES:
        bucket, key = _bucket_and_key(uri)
        return _arrow_s3(s3_options(bucket, settings)), f"{bucket}/{key}".rstrip("/")
    if kind in HDFS_SCHEMES:
        u = urlparse(str(uri))
        return _arrow_hdfs(u.hostname or "", u.port, settings), unquote(u.path) or "/"
    return pafs.FileSystem.from_uri(str(uri))


@functools.lru_cache(maxsize=32)
def _arrow_s3(s3: S3Options):
    from pyarrow import fs as pafs

    kw: dict = {}
    if s3.access_key:
        kw.update(access_key=s3.access_key, secret_key=s3.secret_key or "")
        if s3.session_token:
            kw["session_token"] = s3.session_token
    elif s3.anonymous:
        kw["anonymous"] = True
    if s3.region:
        kw["region"] = s3.region
    if s3.endpoint:
        u = urlparse(s3.endpoint)
        kw.update(endpoint_override=u.netloc + u.path, scheme=u.scheme, force_virtual_addressing=not s3.path_style)
        kw.setdefault("region", "us-east-1")
    return pafs.S3FileSystem(**kw)


@functools.lru_cache(maxsize=8)
def _arrow_hdfs(host: str, port: int | None, settings: StorageSettings):
    from hdfs_native.fsspec import HdfsFileSystem
    from pyarrow import fs as pafs

    return pafs.PyFileSystem(pafs.FSSpecHandler(HdfsFileSystem(host or None, port, **hdfs_config(settings))))


def hdfs_client(uri: str, settings: StorageSettings | None = None):
    """An hdfs-native ``Client`` for the namenode of ``uri`` (``hdfs://nn:port/...``), with the
    settings' HDFS options (the warehouse lock uses it)."""
    from hdfs_native import Client

    if scheme(uri) not in HDFS_SCHEMES:
        raise StorageError(f"{uri}: not an hdfs:// URI")
    u = urlparse(str(uri))
    return Client(f"hdfs://{u.netloc}" if u.netloc else None, hdfs_config(settings or current()))


def object_store(uri: str, settings: StorageSettings | None = None):
    """``(obstore store, path in it)`` of an S3 URI: an ``S3Store`` of its bucket with the same
    options delta-rs gets (:func:`delta_storage_options`). Other schemes raise
    :class:`StorageError`.

    >>> store, path = object_store("s3a://bucket/wh/_pipeline/.lock", StorageSettings.of({"fs.s3a.endpoint": "h:9"}))
    >>> type(store).__name__, path
    ('S3Store', 'wh/_pipeline/.lock')
    """
    from obstore.store import S3Store

    if scheme(uri) not in S3_SCHEMES:
        raise StorageError(f"{uri}: no object store for the scheme {scheme(uri)!r} (s3, s3a or s3n)")
    bucket, key = _bucket_and_key(uri)
    return S3Store(bucket, config=delta_storage_options(uri, settings) or {}), key
