/*
 * A Delta LogStore for S3 that is safe with many writers in many JVMs: a commit file is created
 * with ONE conditional PUT (If-None-Match: *), which S3 refuses (412) when the key exists.
 *
 * Built by `python -m pipelines.log_store build` (make setup) into jars/; see pipelines/log_store.py
 * and docs/deploy.md ("Several writers on S3") for how sessions and clusters use it.
 */
package io.binlogdelta.storage;

import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Arrays;
import java.util.Iterator;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.fs.s3a.S3AUtils;
import org.apache.hadoop.fs.s3a.audit.AuditSpanS3A;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.awscore.AwsRequestOverrideConfiguration;
import software.amazon.awssdk.awscore.exception.AwsServiceException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;

/**
 * Multi-driver LogStore for {@code s3a://} (and {@code s3://} mapped to S3A).
 *
 * <p>Delta's default for S3, {@code S3SingleDriverLogStore}, checks that {@code N.json} does not
 * exist and then writes it: two drivers can both write version N and the later PUT replaces the
 * earlier commit. Here a non-overwrite write is a single PutObject with {@code If-None-Match: *}
 * through the S3 client and request factory S3A itself uses (its credentials, endpoint, retries,
 * encryption, ACL and storage class). When the key exists S3 answers 412 Precondition Failed (or
 * 409 ConditionalRequestConflict while another conditional write of it is in flight); that
 * becomes {@link FileAlreadyExistsException}, on which Delta's commit loop checks the winning
 * commit for conflicts and tries the next version. The store must honour conditional writes
 * (AWS S3 since August 2024, MinIO, moto); one that ignores the header would overwrite silently.
 *
 * <p>A PUT whose response was lost and that the SDK retried answers 412 for its own object: when
 * the object there holds exactly the bytes this write sent, the write took effect and returns
 * normally (a commit carries its timestamp and the data files' random names, so another commit
 * never has the same bytes).
 *
 * <p>Overwrites ({@code _last_checkpoint}) are a plain S3A create, itself one atomic PUT. Reads
 * and listings are {@link HadoopFileSystemLogStore}'s (S3 lists what it wrote since December
 * 2020: no in-JVM cache of written files is kept). A PUT is atomic, so a partial write is never
 * visible.
 */
public class ConditionalPutS3LogStore extends HadoopFileSystemLogStore {

    private static final Logger LOG = LoggerFactory.getLogger(ConditionalPutS3LogStore.class);
    static final String IF_NONE_MATCH = "If-None-Match";

    public ConditionalPutS3LogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        Path qualified = fs.makeQualified(path);
        byte[] body = serialize(actions);
        if (overwrite) {
            try (FSDataOutputStream out = fs.create(qualified, true)) {
                out.write(body);
            }
            return;
        }
        if (!(fs instanceof S3AFileSystem)) {
            throw new IOException(getClass().getSimpleName() + " needs S3AFileSystem for " + qualified
                + ", but that path's file system is " + fs.getClass().getName());
        }
        putIfAbsent((S3AFileSystem) fs, qualified, body);
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;
    }

    /** One conditional PUT of {@code body} at {@code path}'s key. */
    private static void putIfAbsent(S3AFileSystem fs, Path path, byte[] body) throws IOException {
        String key = fs.pathToKey(path);
        try (AuditSpanS3A span = fs.createSpan("op_create", path.toString(), null)) {
            PutObjectRequest.Builder request = fs.getRequestFactory()
                .newPutObjectRequestBuilder(key, null, body.length, false);
            AwsRequestOverrideConfiguration before = request.overrideConfiguration();
            request.overrideConfiguration((before == null ? AwsRequestOverrideConfiguration.builder()
                : before.toBuilder()).putHeader(IF_NONE_MATCH, "*").build());
            fs.getS3AInternals().getAmazonS3Client("conditional put of a Delta log file")
                .putObject(request.build(), RequestBody.fromBytes(body));
        } catch (AwsServiceException e) {
            if (!isExistingKey(e)) {
                throw S3AUtils.translateException("conditional put", path, e);
            }
            if (holds(fs, path, body)) {
                LOG.info("{}: a retried conditional PUT found its own earlier attempt there", path);
                return;
            }
            FileAlreadyExistsException exists = new FileAlreadyExistsException(path.toString(), null,
                "exists already (S3 answered " + e.statusCode() + " to a PUT with If-None-Match: *)");
            exists.initCause(e);
            throw exists;
        } catch (SdkException e) {
            throw S3AUtils.translateException("conditional put", path, e);
        }
    }

    /** 412 Precondition Failed, or 409 ConditionalRequestConflict: the key exists or is being created. */
    private static boolean isExistingKey(AwsServiceException e) {
        if (e.statusCode() == 412) {
            return true;
        }
        String code = e.awsErrorDetails() == null ? null : e.awsErrorDetails().errorCode();
        return e.statusCode() == 409 && "ConditionalRequestConflict".equals(code);
    }

    /** True when the object at {@code path} holds exactly {@code body}. */
    private static boolean holds(FileSystem fs, Path path, byte[] body) throws IOException {
        try (InputStream in = fs.open(path)) {
            byte[] there = in.readNBytes(body.length + 1);
            return Arrays.equals(there, body);
        } catch (FileNotFoundException e) {
            return false;  // (a 409 whose competing write then failed)
        }
    }

    private static byte[] serialize(Iterator<String> actions) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        while (actions.hasNext()) {
            out.writeBytes((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
        return out.toByteArray();
    }
}
