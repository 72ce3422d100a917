package dev.eqdv.interop;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.BaseMetastoreCatalog;
import org.apache.iceberg.BaseMetastoreTableOperations;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.aws.s3.S3FileIO;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.CommitStateUnknownException;
import org.apache.iceberg.exceptions.NoSuchTableException;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.io.OutputFile;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.http.ContentStreamProvider;
import software.amazon.awssdk.http.SdkHttpMethod;
import software.amazon.awssdk.http.SdkHttpRequest;
import software.amazon.awssdk.http.auth.aws.signer.AwsV4HttpSigner;

/**
 * An Iceberg catalog over one Amazon S3 Tables table bucket, spoken to directly through its
 * REST-JSON API (the AWS SDK's s3tables module and AWS's own catalog jar are not available to
 * this build). S3 Tables stores one pointer per table: the current metadata file, guarded by a
 * version token that changes on every update, which is all an Iceberg commit needs.
 */
final class TableBucketCatalog extends BaseMetastoreCatalog {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final String bucketArn;
  private final URI endpoint;
  private final String region;
  private final FileIO io;
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private final AwsCredentialsProvider credentials = DefaultCredentialsProvider.builder().build();
  private final AwsV4HttpSigner signer = AwsV4HttpSigner.create();

  /** The catalog the environment names: EQDV_S3TABLES_BUCKET_ARN, AWS_ENDPOINT_URL_S3TABLES. */
  static TableBucketCatalog fromEnvironment(Map<String, String> ioProps, Map<String, String> env) {
    String arn = nonEmpty(env.get("EQDV_S3TABLES_BUCKET_ARN"));
    if (arn == null || !arn.startsWith("arn:")) {
      throw new IllegalArgumentException(
          "EQDV_INTEROP_CATALOG=s3tables needs EQDV_S3TABLES_BUCKET_ARN, the table bucket's ARN"
              + " (arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME)");
    }
    String region = nonEmpty(env.get("AWS_REGION"));
    if (region == null) {
      region = nonEmpty(env.get("AWS_DEFAULT_REGION"));
    }
    if (region == null) {
      throw new IllegalArgumentException(
          "EQDV_INTEROP_CATALOG=s3tables needs AWS_REGION (or AWS_DEFAULT_REGION) to sign with");
    }
    String endpoint = nonEmpty(env.get("AWS_ENDPOINT_URL_S3TABLES"));
    if (endpoint == null) {
      endpoint = "https://s3tables." + region + ".amazonaws.com";
    }
    S3FileIO s3 = new S3FileIO();
    s3.initialize(ioProps);
    return new TableBucketCatalog(arn, URI.create(endpoint.replaceAll("/+$", "")), region, s3);
  }

  private TableBucketCatalog(String bucketArn, URI endpoint, String region, FileIO s3) {
    this.bucketArn = bucketArn;
    this.endpoint = endpoint;
    this.region = region;
    this.io = new KeepingFileIO(s3);
  }

  @Override
  public String name() {
    return Catalogs.CATALOG_NAME;
  }

  @Override
  protected TableOperations newTableOps(TableIdentifier id) {
    return new Ops(namespaceOf(id), id.name());
  }

  /**
   * S3 Tables, not Iceberg, decides where a table's files go: the S3 Tables table is made here
   * (with its namespace), when Iceberg asks where a new table should live, and its own location
   * is the answer. A table left without metadata by an earlier failed create is reused.
   */
  @Override
  protected String defaultWarehouseLocation(TableIdentifier id) {
    String ns = namespaceOf(id);
    ObjectNode nsBody = JSON.createObjectNode();
    nsBody.putArray("namespace").add(ns);
    try {
      call("PUT", "/namespaces/" + enc(bucketArn), Map.of(), nsBody);
    } catch (ApiException e) {
      if (e.status != 409) { // 409: the namespace exists already
        throw e;
      }
    }
    ObjectNode tableBody = JSON.createObjectNode().put("name", id.name()).put("format", "ICEBERG");
    try {
      call("PUT", "/tables/" + enc(bucketArn) + "/" + enc(ns), Map.of(), tableBody);
    } catch (ApiException e) {
      if (e.status != 409) { // 409: made by a concurrent creator or an earlier attempt
        throw e;
      }
    }
    return call("GET", tablePath(ns, id.name()) + "/metadata-location", Map.of(), null)
        .path("warehouseLocation")
        .asText();
  }

  @Override
  public List<TableIdentifier> listTables(Namespace namespace) {
    String ns = namespaceOf(TableIdentifier.of(namespace, "any"));
    List<TableIdentifier> out = new ArrayList<>();
    String next = null;
    do {
      Map<String, String> query = new LinkedHashMap<>();
      query.put("namespace", ns);
      if (next != null) {
        query.put("continuationToken", next);
      }
      JsonNode page = call("GET", "/tables/" + enc(bucketArn), query, null);
      for (JsonNode t : page.path("tables")) {
        out.add(TableIdentifier.of(Namespace.of(t.path("namespace").path(0).asText()),
            t.path("name").asText()));
      }
      next = page.hasNonNull("continuationToken") ? page.get("continuationToken").asText() : null;
    } while (next != null);
    return out;
  }

  /** Drops the S3 Tables table, which takes its files with it (purge changes nothing). */
  @Override
  public boolean dropTable(TableIdentifier id, boolean purge) {
    String path = tablePath(namespaceOf(id), id.name());
    try {
      String token = call("GET", path + "/metadata-location", Map.of(), null)
          .path("versionToken").asText();
      call("DELETE", path, Map.of("versionToken", token), null);
      return true;
    } catch (ApiException e) {
      if (e.status == 404) {
        return false;
      }
      throw e;
    }
  }

  @Override
  public void renameTable(TableIdentifier from, TableIdentifier to) {
    throw new UnsupportedOperationException("the S3 Tables test catalog does not rename tables");
  }

  @Override
  public void close() throws IOException {
    super.close();
    io.close();
  }

  private static String namespaceOf(TableIdentifier id) {
    if (id.namespace().levels().length != 1) {
      throw new IllegalArgumentException(
          "S3 Tables namespaces have exactly one level; got '" + id.namespace() + "' in " + id);
    }
    return id.namespace().level(0);
  }

  private String tablePath(String ns, String name) {
    return "/tables/" + enc(bucketArn) + "/" + enc(ns) + "/" + enc(name);
  }

  /** Percent-encodes one path label (the ARN's ':' and '/' included). */
  private static String enc(String label) {
    return URLEncoder.encode(label, StandardCharsets.UTF_8).replace("+", "%20");
  }

  private static String nonEmpty(String s) {
    return s == null || s.isBlank() ? null : s.trim();
  }

  /** An error answer of the API: its HTTP status and the service's message. */
  static final class ApiException extends RuntimeException {
    final int status;

    ApiException(int status, String message) {
      super(message);
      this.status = status;
    }
  }

  /** The first attempt's failure to reach the service at all: nothing was sent. */
  static final class NotSentException extends UncheckedIOException {
    NotSentException(String message, IOException cause) {
      super(message, cause);
    }
  }

  /**
   * One signed request (SigV4, service s3tables); the JSON answer, {@link ApiException} for an
   * error status, {@link NotSentException} when the connection failed, UncheckedIOException for
   * any other transport failure (the request may have been applied).
   */
  private JsonNode call(String method, String path, Map<String, String> query, JsonNode body) {
    byte[] payload = body == null ? null : body.toString().getBytes(StandardCharsets.UTF_8);
    SdkHttpRequest.Builder unsigned =
        SdkHttpRequest.builder()
            .method(SdkHttpMethod.fromValue(method))
            .protocol(endpoint.getScheme())
            .host(endpoint.getHost())
            .port(endpoint.getPort() == -1 ? null : endpoint.getPort())
            .encodedPath(path);
    query.forEach(unsigned::putRawQueryParameter);
    if (payload != null) {
      unsigned.putHeader("Content-Type", "application/json");
    }
    SdkHttpRequest signed =
        signer
            .sign(r -> r.identity(credentials.resolveCredentials())
                .request(unsigned.build())
                .payload(payload == null ? null : ContentStreamProvider.fromByteArray(payload))
                .putProperty(AwsV4HttpSigner.SERVICE_SIGNING_NAME, "s3tables")
                .putProperty(AwsV4HttpSigner.REGION_NAME, region))
            .request();
    HttpRequest.Builder request =
        HttpRequest.newBuilder(signed.getUri())
            .timeout(Duration.ofSeconds(60))
            .method(method, payload == null
                ? HttpRequest.BodyPublishers.noBody()
                : HttpRequest.BodyPublishers.ofByteArray(payload));
    // java.net.http sets Host and Content-Length itself (to what was signed) and refuses them.
    signed.forEachHeader((name, values) -> {
      if (!name.equalsIgnoreCase("Host") && !name.equalsIgnoreCase("Content-Length")) {
        values.forEach(v -> request.header(name, v));
      }
    });
    HttpResponse<String> response;
    try {
      response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
    } catch (ConnectException e) {
      throw new NotSentException(method + " " + path + ": cannot connect to " + endpoint, e);
    } catch (IOException e) {
      throw new UncheckedIOException(method + " " + path + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new UncheckedIOException(method + " " + path + ": interrupted", new IOException(e));
    }
    String text = response.body();
    JsonNode json;
    try {
      json = text == null || text.isBlank() ? JSON.createObjectNode() : JSON.readTree(text);
    } catch (IOException e) {
      json = JSON.createObjectNode().put("message", text);
    }
    if (response.statusCode() >= 300) {
      String type = response.headers().firstValue("x-amzn-ErrorType")
          .orElse(json.path("__type").asText("error")).replaceAll(":.*", "");
      throw new ApiException(response.statusCode(), "S3 Tables " + method + " " + path + ": "
          + response.statusCode() + " " + type + ": " + json.path("message").asText(text));
    }
    return json;
  }

  /** One table's pointer: read with its version token, swapped only with that token. */
  private final class Ops extends BaseMetastoreTableOperations {
    private final String namespace;
    private final String name;
    // The token of the last read pointer and the location it named, kept together so that a
    // commit can only swap the pointer it was based on.
    private String token;
    private String tokenLocation;

    Ops(String namespace, String name) {
      this.namespace = namespace;
      this.name = name;
    }

    @Override
    protected String tableName() {
      return namespace + "." + name;
    }

    @Override
    public FileIO io() {
      return io;
    }

    /** A table S3 Tables knows but no commit has given metadata yet reads as absent. */
    @Override
    protected void doRefresh() {
      String location = null;
      String newToken = null;
      try {
        JsonNode r = call("GET", tablePath(namespace, name) + "/metadata-location", Map.of(), null);
        newToken = r.path("versionToken").asText(null);
        location = r.hasNonNull("metadataLocation") ? r.get("metadataLocation").asText() : null;
      } catch (ApiException e) {
        if (e.status != 404) {
          throw e;
        }
      }
      if (location == null && currentMetadataLocation() != null) {
        throw new NoSuchTableException("table %s was dropped from S3 Tables", tableName());
      }
      token = newToken;
      tokenLocation = location;
      refreshFromMetadataLocation(location);
    }

    @Override
    protected void doCommit(TableMetadata base, TableMetadata metadata) {
      boolean creating = base == null;
      String expected = creating ? null : base.metadataFileLocation();
      String useToken = token;
      if (creating) {
        // The S3 Tables table was made (by defaultWarehouseLocation) after the refresh.
        JsonNode r = call("GET", tablePath(namespace, name) + "/metadata-location", Map.of(), null);
        if (r.hasNonNull("metadataLocation")) {
          throw new CommitFailedException("table %s was created concurrently", tableName());
        }
        useToken = r.path("versionToken").asText();
      } else if (useToken == null || !expected.equals(tokenLocation)) {
        throw new CommitFailedException("cannot commit %s: its pointer was not read", tableName());
      }
      String newLocation = writeNewMetadataIfRequired(creating, metadata);
      ObjectNode body = JSON.createObjectNode()
          .put("versionToken", useToken)
          .put("metadataLocation", newLocation);
      try {
        call("PUT", tablePath(namespace, name) + "/metadata-location", Map.of(), body);
      } catch (ApiException e) {
        if (e.status == 409 || e.status == 404) { // a stale token: Iceberg retries from a refresh
          throw new CommitFailedException("cannot commit %s: %s", tableName(), e.getMessage());
        }
        if (e.status >= 500) { // the swap may or may not have happened
          throw new CommitStateUnknownException(e);
        }
        throw e;
      } catch (NotSentException e) {
        throw new CommitFailedException(e, "cannot commit %s: %s", tableName(), e.getMessage());
      } catch (UncheckedIOException e) {
        throw new CommitStateUnknownException(e);
      }
    }
  }

  /**
   * S3FileIO that never deletes: S3 Tables refuses object deletes (its own maintenance removes
   * unreferenced files), and Iceberg's cleanups (after a failed commit, of merged manifests)
   * must not fail a writer over it.
   */
  private static final class KeepingFileIO implements FileIO {
    private final FileIO delegate;

    KeepingFileIO(FileIO delegate) {
      this.delegate = delegate;
    }

    @Override
    public InputFile newInputFile(String path) {
      return delegate.newInputFile(path);
    }

    @Override
    public InputFile newInputFile(String path, long length) {
      return delegate.newInputFile(path, length);
    }

    @Override
    public OutputFile newOutputFile(String path) {
      return delegate.newOutputFile(path);
    }

    @Override
    public void deleteFile(String path) {
      // Left for S3 Tables' unreferenced-file removal.
    }

    @Override
    public Map<String, String> properties() {
      return delegate.properties();
    }

    @Override
    public void close() {
      delegate.close();
    }
  }
}
