package org.apache.iceberg;

/**
 * Reaches {@code RemoveSnapshots.withIncrementalCleanup}, which is package-private: the
 * randomized histories choose between the incremental file cleanup (what the Table API uses for
 * a table whose only branch is main) and the reachable-file cleanup (a set difference of the
 * files reachable before and after, used when there are other refs).
 */
public final class ExpireAccess {
  private ExpireAccess() {}

  public static ExpireSnapshots withIncrementalCleanup(ExpireSnapshots expire, boolean incremental) {
    return ((RemoveSnapshots) expire).withIncrementalCleanup(incremental);
  }
}
