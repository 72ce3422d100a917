package dev.eqdv.flink;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.apache.flink.types.RowKind;

/**
 * The changelog the Flink job writes, one batch per checkpoint, and the model of what it leaves
 * live: a map from key to row, updated in the order the events are emitted, as an upsert sink
 * must (INSERT and UPDATE_AFTER replace the key's row, DELETE removes it, UPDATE_BEFORE does
 * nothing). Deterministic for a seed and a starting state.
 *
 * <p>Each batch has the shapes a CDC source sends an upsert sink: new keys; updates of keys
 * written in earlier checkpoints (equality deletes); two updates each of some keys inserted in the
 * same batch (position deletes against the batch's own data file, DVs on a v3 table); deletes of
 * older keys, of a key inserted in the batch, and of an older key updated in the batch; and a
 * key deleted earlier inserted again.
 */
final class Changelog {
  /** One row: key k, its partition column p (a function of k), a value and a version. */
  record Row(long k, int p, String v, long n) implements Serializable {
    /** Canonical form (as the interop jar's {@code dump} prints rows of this schema). */
    String canonical() {
      return "[" + k + "," + p + ",\"" + v + "\"," + n + "]";
    }
  }

  /** One changelog event. */
  record Event(RowKind kind, Row row) implements Serializable {}

  static int partitionOf(long k) {
    return (int) Math.floorMod(k, 4L);
  }

  private final Random random;
  private final long seed;
  private final TreeMap<Long, Row> live;
  private final List<Long> deleted = new ArrayList<>();
  private long nextKey;
  private long version;

  /** A changelog continuing from {@code existing} (the branch's live rows by key). */
  Changelog(long seed, Map<Long, Row> existing) {
    this.seed = seed;
    this.random = new Random(seed);
    this.live = new TreeMap<>(existing);
    this.nextKey = existing.isEmpty() ? 1 : live.lastKey() + 1;
  }

  List<Row> live() {
    return new ArrayList<>(live.values());
  }

  private Row row(long k, int checkpoint) {
    version++;
    String v = "s" + seed + "c" + checkpoint + "x" + Integer.toString(random.nextInt(1 << 20), 36);
    return new Row(k, partitionOf(k), v, checkpoint * 100_000L + version);
  }

  /** The events of checkpoint {@code checkpoint} (1-based), applied to the model. */
  List<Event> batch(int checkpoint) {
    List<Event> out = new ArrayList<>();
    List<Long> older = new ArrayList<>(live.keySet());
    // Keys from earlier checkpoints, picked without repeats.
    Collections.shuffle(older, random);
    int o = 0;

    int inserts = live.isEmpty() ? 60 : 20;
    List<Long> fresh = new ArrayList<>();
    for (int i = 0; i < inserts; i++) {
      long k = nextKey++;
      fresh.add(k);
      upsert(out, RowKind.INSERT, row(k, checkpoint));
    }
    // Keys inserted in this checkpoint, updated twice.
    for (int i = 0; i < 4; i++) {
      long k = fresh.get(random.nextInt(fresh.size()));
      for (int twice = 0; twice < 2; twice++) {
        update(out, k, checkpoint);
      }
    }
    // Keys from earlier checkpoints updated.
    for (int i = 0; i < 8 && o < older.size(); i++) {
      update(out, older.get(o++), checkpoint);
    }
    // Keys from earlier checkpoints deleted.
    for (int i = 0; i < 5 && o < older.size(); i++) {
      delete(out, older.get(o++));
    }
    // An older key updated, then deleted, in this checkpoint.
    if (o < older.size()) {
      long k = older.get(o++);
      update(out, k, checkpoint);
      delete(out, k);
    }
    // A key inserted in this checkpoint deleted again.
    for (int i = 0; i < 2; i++) {
      long k = fresh.get(random.nextInt(fresh.size()));
      if (live.containsKey(k)) {
        delete(out, k);
      }
    }
    // A key deleted in an earlier checkpoint inserted again.
    List<Long> dead = new ArrayList<>();
    for (long k : deleted) {
      if (!live.containsKey(k) && !fresh.contains(k)) {
        dead.add(k);
      }
    }
    if (!dead.isEmpty()) {
      long k = dead.get(random.nextInt(dead.size()));
      upsert(out, RowKind.INSERT, row(k, checkpoint));
    }
    return out;
  }

  private void update(List<Event> out, long k, int checkpoint) {
    Row before = live.get(k);
    if (before != null) {
      // What a CDC source sends; an upsert sink ignores it.
      out.add(new Event(RowKind.UPDATE_BEFORE, before));
    }
    upsert(out, RowKind.UPDATE_AFTER, row(k, checkpoint));
  }

  private void upsert(List<Event> out, RowKind kind, Row row) {
    out.add(new Event(kind, row));
    live.put(row.k(), row);
  }

  private void delete(List<Event> out, long k) {
    Row before = live.remove(k);
    if (before != null) {
      out.add(new Event(RowKind.DELETE, before));
      deleted.add(k);
    }
  }
}
