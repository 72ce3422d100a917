package dev.eqdv.interop;

import java.util.HashMap;
import java.util.Map;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.aws.glue.GlueCatalog;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalog;

/**
 * The Glue catalog with S3FileIO, configured only from the AWS SDK's standard environment
 * variables (so it reaches real AWS, or MinIO plus a Glue emulator, with no other setting).
 * Credentials are left to the SDK's default chain and never printed.
 */
final class Catalogs {
  static final String CATALOG_NAME = "eqdv";

  private Catalogs() {}

  /** The catalog properties for {@code warehouse}, from the environment. */
  static Map<String, String> properties(String warehouse, Map<String, String> env) {
    Map<String, String> props = new HashMap<>();
    props.put(CatalogProperties.WAREHOUSE_LOCATION, warehouse);
    props.put(CatalogProperties.FILE_IO_IMPL, "org.apache.iceberg.aws.s3.S3FileIO");
    // Every commit is a new Glue table version otherwise; the emulator and the tests need none.
    props.put("glue.skip-archive", "true");
    String s3 = nonEmpty(env.get("AWS_ENDPOINT_URL_S3"));
    if (s3 == null) {
      s3 = nonEmpty(env.get("AWS_ENDPOINT_URL"));
    }
    if (s3 != null) {
      props.put("s3.endpoint", s3);
      // MinIO and LocalStack serve buckets by path, not by virtual host.
      props.put("s3.path-style-access", "true");
    }
    String glue = nonEmpty(env.get("AWS_ENDPOINT_URL_GLUE"));
    if (glue == null) {
      glue = nonEmpty(env.get("AWS_ENDPOINT_URL"));
    }
    if (glue != null) {
      props.put("glue.endpoint", glue);
    }
    String region = nonEmpty(env.get("AWS_REGION"));
    if (region == null) {
      region = nonEmpty(env.get("AWS_DEFAULT_REGION"));
    }
    if (region != null) {
      props.put("client.region", region);
    }
    return props;
  }

  /**
   * The catalog of the test services: Glue, or the Iceberg REST catalog at {@code
   * EQDV_REST_URI} when {@code EQDV_INTEROP_CATALOG=rest} (the REST server decides where a new
   * table goes; {@code warehouse} only names the client's warehouse), or the Amazon S3 Tables
   * table bucket {@code EQDV_S3TABLES_BUCKET_ARN} when {@code EQDV_INTEROP_CATALOG=s3tables}
   * (API at {@code AWS_ENDPOINT_URL_S3TABLES}, else AWS's; S3 Tables places every table, so
   * {@code warehouse} is unused there too; see {@link TableBucketCatalog}).
   */
  static Catalog open(String warehouse) {
    Map<String, String> env = System.getenv();
    String kind = nonEmpty(env.get("EQDV_INTEROP_CATALOG"));
    if ("s3tables".equals(kind)) {
      return TableBucketCatalog.fromEnvironment(properties(warehouse, env), env);
    }
    if ("rest".equals(kind)) {
      String uri = nonEmpty(env.get("EQDV_REST_URI"));
      if (uri == null) {
        throw new IllegalArgumentException("EQDV_INTEROP_CATALOG=rest needs EQDV_REST_URI");
      }
      Map<String, String> props = properties(warehouse, env);
      props.put(CatalogProperties.URI, uri);
      RESTCatalog catalog = new RESTCatalog();
      catalog.initialize(CATALOG_NAME, props);
      return catalog;
    }
    GlueCatalog catalog = new GlueCatalog();
    catalog.initialize(CATALOG_NAME, properties(warehouse, env));
    return catalog;
  }

  private static String nonEmpty(String s) {
    return s == null || s.isBlank() ? null : s.trim();
  }
}
