package dev.eqdv.flink;

import java.util.List;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.source.RichSourceFunction;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;

/**
 * Emits each batch of the changelog, then waits until a checkpoint taken after it completed
 * before the next one: every batch lands in a checkpoint of its own, so the sink commits one
 * snapshot per batch and a key inserted in a batch is "inserted in the same checkpoint" for the
 * writer exactly as the model assumes.
 *
 * <p>A legacy SourceFunction (deprecated in Flink 1.20, still supported) because its checkpoint
 * lock makes "all of this batch before the next barrier" a plain synchronized block; the new
 * Source API has no such lock.
 */
@SuppressWarnings("deprecation")
final class BatchPerCheckpoint extends RichSourceFunction<RowData>
    implements CheckpointedFunction, CheckpointListener {
  private final List<List<Changelog.Event>> batches;
  private volatile boolean running = true;
  // The newest checkpoint whose barrier this source emitted (set under the checkpoint lock).
  private volatile long lastTriggered = -1;
  private volatile long lastCompleted = -1;

  BatchPerCheckpoint(List<List<Changelog.Event>> batches) {
    this.batches = batches;
  }

  @Override
  public void run(SourceContext<RowData> ctx) throws Exception {
    for (List<Changelog.Event> batch : batches) {
      long before;
      synchronized (ctx.getCheckpointLock()) {
        for (Changelog.Event e : batch) {
          Changelog.Row r = e.row();
          ctx.collect(
              GenericRowData.ofKind(e.kind(), r.k(), r.p(), StringData.fromString(r.v()), r.n()));
        }
        before = lastTriggered;
      }
      // The batch is in the first checkpoint after `before`: wait for one of those to complete.
      while (running && lastCompleted <= before) {
        Thread.sleep(5);
      }
    }
  }

  @Override
  public void cancel() {
    running = false;
  }

  @Override
  public void snapshotState(FunctionSnapshotContext context) {
    lastTriggered = context.getCheckpointId();
  }

  @Override
  public void initializeState(FunctionInitializationContext context) {
    // Nothing to restore: the job runs with no restart strategy, a failure fails the run.
  }

  @Override
  public void notifyCheckpointComplete(long checkpointId) {
    lastCompleted = Math.max(lastCompleted, checkpointId);
  }
}
