// The stack's settings, read from CDK context (`-c key=value` or cdk.json). They are
// the CDK counterparts of template.yaml's parameters; unlike CloudFormation
// parameters they are known at synth time, so lists become explicit ARNs and the
// queue's visibility timeout is computed.

/** Where the tables are: the Glue Data Catalog, or an Amazon S3 Tables table bucket. */
export type Catalog = 'glue' | 's3tables';

/** The settings of one eqdv deployment. */
export interface EqdvConfig {
  /** The catalog (EQDV_CATALOG): decides the IAM statements and the planner's event rule. */
  readonly catalog: Catalog;
  /**
   * With catalog `s3tables` (required then, and only then): the table bucket's ARN,
   * `arn:PARTITION:s3tables:REGION:ACCOUNT:bucket/NAME` (EQDV_S3TABLES_BUCKET_ARN).
   */
  readonly tableBucketArn: string;
  /**
   * Glue databases, or with catalog `s3tables` the table bucket's namespaces, eqdv may
   * convert tables of (required).
   */
  readonly databases: string[];
  /**
   * S3 prefixes the tables live under, as `bucket/prefix` (required with catalog
   * `glue`; ignored with `s3tables`, whose storage the s3tables actions authorize).
   */
  readonly tableLocations: string[];
  /** Optional `db.table` allowlist; empty means every table of the databases. */
  readonly allowedTables: string[];
  /** Glue catalog id; empty means the deploying account's catalog (ignored with `s3tables`). */
  readonly glueCatalogId: string;
  readonly branch: string;
  readonly logLevel: string;
  readonly metricsNamespace: string;
  readonly sweepSchedule: string;
  readonly shardTargetMb: number;
  readonly queueGroups: number;
  readonly maxReceiveCount: number;
  readonly converterBatchSize: number;
  readonly converterMaxConcurrency: number;
  /**
   * A shard estimated above this many MB of work is split into data ranges of at most
   * this much each (2 to `maxRanges`), converted by the split state machine and
   * committed once; 0 splits every shard into `maxRanges`.
   */
  readonly splitAboveMb: number;
  readonly maxRanges: number;
  readonly plannerTimeout: number;
  /** Also sets the planner's share of vCPUs, which its own conversions use. */
  readonly plannerMemorySize: number;
  /**
   * A commit planned as one shard of at most this many MB of work (not split) is
   * converted by the planner in the same invocation instead of going to the shard
   * queue (which it still does on failure or when time runs short); 0 sends every
   * shard to the queue.
   */
  readonly convertInPlannerMaxMb: number;
  readonly converterTimeout: number;
  readonly converterMemorySize: number;
  readonly keyMemoryMb: number;
  /**
   * The key index's mode (EQDV_KEY_INDEX): `auto` uses and keeps a table's index and
   * builds one where a conversion read many data files; `true` builds it for every
   * table; `false` neither uses nor keeps one.
   */
  readonly keyIndex: 'auto' | 'true' | 'false';
  readonly parallelism: number;
  readonly readMemoryMb: number;
  /** Empty means the table's `commit.retry.num-retries`. */
  readonly commitRetries: string;
  readonly deadlineMarginSeconds: number;
  readonly logRetentionDays: number;
  /** SNS topic the alarms notify; empty means no alarm actions. */
  readonly alarmTopicArn: string;
  /** Directories holding cargo-lambda's `bootstrap` for each function. */
  readonly plannerAsset: string;
  readonly converterAsset: string;
}

/** Every context key the app reads, with its default (undefined = required). */
export const CONTEXT_DEFAULTS: Record<keyof EqdvConfig, string | undefined> = {
  catalog: 'glue',
  tableBucketArn: '',
  databases: undefined,
  // Required with catalog glue: checked below.
  tableLocations: '',
  allowedTables: '',
  glueCatalogId: '',
  branch: 'main',
  logLevel: 'info',
  metricsNamespace: 'eqdv',
  sweepSchedule: 'rate(1 hour)',
  shardTargetMb: '256',
  queueGroups: '1',
  maxReceiveCount: '5',
  converterBatchSize: '1',
  converterMaxConcurrency: '10',
  splitAboveMb: '1024',
  maxRanges: '32',
  plannerTimeout: '300',
  plannerMemorySize: '2048',
  convertInPlannerMaxMb: '256',
  converterTimeout: '900',
  converterMemorySize: '2048',
  keyMemoryMb: '512',
  keyIndex: 'auto',
  parallelism: '0',
  readMemoryMb: '64',
  commitRetries: '',
  deadlineMarginSeconds: '30',
  logRetentionDays: '30',
  alarmTopicArn: '',
  plannerAsset: '../target/lambda/eqdv-planner',
  converterAsset: '../target/lambda/eqdv-converter',
};

// Same patterns as template.yaml's parameters.
// Glue stores names in lowercase, and its events carry them so.
const DATABASE = /^[a-z0-9_-]{1,255}$/;
const TABLE = /^[a-z0-9_-]+\.[a-z0-9_-]+$/;
const LOCATION = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/[^/*?]+)*$/;
const CATALOG_ID = /^[0-9]{12}$/;
const TABLE_BUCKET_ARN = /^arn:aws[a-z-]*:s3tables:[a-z0-9-]+:[0-9]{12}:bucket\/[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/;
const CATALOGS: Catalog[] = ['glue', 's3tables'];
const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
  2922, 3288, 3653,
];

export class ConfigError extends Error {}

/**
 * Reads and checks the settings. `get` returns a context value: a string from
 * `-c key=value`, or any JSON value from cdk.json.
 */
export function loadConfig(get: (key: string) => unknown): EqdvConfig {
  const raw = (key: keyof EqdvConfig): string => {
    const value = get(key);
    if (value === undefined || value === null) {
      const fallback = CONTEXT_DEFAULTS[key];
      if (fallback === undefined) {
        throw new ConfigError(`context value ${key} is required (-c ${key}=...)`);
      }
      return fallback;
    }
    if (Array.isArray(value)) return value.map(String).join(',');
    return String(value).trim();
  };
  const list = (key: keyof EqdvConfig, pattern: RegExp, what: string): string[] => {
    const items = raw(key)
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    for (const item of items) {
      if (!pattern.test(item)) throw new ConfigError(`${key}: '${item}' is not ${what}`);
    }
    if (new Set(items).size !== items.length) throw new ConfigError(`${key}: duplicate entries`);
    return items;
  };
  const int = (key: keyof EqdvConfig, min: number, max: number): number => {
    const text = raw(key);
    if (!/^[0-9]+$/.test(text)) throw new ConfigError(`${key}: '${text}' is not a whole number`);
    const n = Number(text);
    if (n < min || n > max) throw new ConfigError(`${key}: ${n} is not between ${min} and ${max}`);
    return n;
  };
  const keyIndexMode = (key: keyof EqdvConfig): 'auto' | 'true' | 'false' => {
    const text = raw(key).toLowerCase();
    if (text !== 'auto' && text !== 'true' && text !== 'false') {
      throw new ConfigError(`${key}: '${text}' is not auto, true or false`);
    }
    return text;
  };
  const nonEmpty = (key: keyof EqdvConfig): string => {
    const text = raw(key);
    if (text === '') throw new ConfigError(`${key} must not be empty`);
    return text;
  };

  const catalog = raw('catalog').toLowerCase() as Catalog;
  if (!CATALOGS.includes(catalog)) {
    throw new ConfigError(`catalog: '${catalog}' is not ${CATALOGS.join(' or ')}`);
  }
  const databases = list(
    'databases',
    DATABASE,
    'a Glue database name or S3 Tables namespace (lowercase letters, digits, _ and -)',
  );
  if (databases.length === 0) throw new ConfigError('databases: give at least one database');
  const tableBucketArn = raw('tableBucketArn');
  if (tableBucketArn !== '' && !TABLE_BUCKET_ARN.test(tableBucketArn)) {
    throw new ConfigError(
      `tableBucketArn: '${tableBucketArn}' is not a table bucket ARN (arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME)`,
    );
  }
  if (catalog === 's3tables' && tableBucketArn === '') {
    throw new ConfigError(
      'tableBucketArn is required with catalog s3tables (-c tableBucketArn=arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME)',
    );
  }
  if (catalog === 'glue' && tableBucketArn !== '') {
    throw new ConfigError('tableBucketArn is for catalog s3tables (-c catalog=s3tables), not glue');
  }
  const tableLocations = list(
    'tableLocations',
    LOCATION,
    'bucket or bucket/prefix (no s3://, wildcards or trailing slash)',
  );
  if (catalog === 'glue' && tableLocations.length === 0) {
    throw new ConfigError('tableLocations is required with catalog glue (-c tableLocations=bucket/prefix,...)');
  }
  const allowedTables = list('allowedTables', TABLE, 'db.table');
  for (const table of allowedTables) {
    const db = table.split('.')[0];
    if (!databases.includes(db)) {
      throw new ConfigError(`allowedTables: ${table} is not in one of the databases (${databases.join(',')})`);
    }
  }
  const glueCatalogId = raw('glueCatalogId');
  if (glueCatalogId !== '' && !CATALOG_ID.test(glueCatalogId)) {
    throw new ConfigError(`glueCatalogId: '${glueCatalogId}' is not a 12-digit account id`);
  }
  const commitRetries = raw('commitRetries');
  if (commitRetries !== '' && !/^[0-9]+$/.test(commitRetries)) {
    throw new ConfigError(`commitRetries: '${commitRetries}' is not empty or a whole number`);
  }
  const logRetentionDays = int('logRetentionDays', 1, 3653);
  if (!LOG_RETENTION_DAYS.includes(logRetentionDays)) {
    throw new ConfigError(`logRetentionDays: ${logRetentionDays} is not one of ${LOG_RETENTION_DAYS.join(', ')}`);
  }
  const deadlineMarginSeconds = int('deadlineMarginSeconds', 0, 899);
  const converterTimeout = int('converterTimeout', 1, 900);
  if (converterTimeout <= deadlineMarginSeconds) {
    throw new ConfigError(
      `converterTimeout (${converterTimeout}) must exceed deadlineMarginSeconds (${deadlineMarginSeconds})`,
    );
  }

  return {
    catalog,
    tableBucketArn,
    databases,
    tableLocations,
    allowedTables,
    glueCatalogId,
    branch: nonEmpty('branch'),
    logLevel: nonEmpty('logLevel'),
    metricsNamespace: nonEmpty('metricsNamespace'),
    sweepSchedule: nonEmpty('sweepSchedule'),
    shardTargetMb: int('shardTargetMb', 1, 1_000_000),
    queueGroups: int('queueGroups', 1, 16),
    maxReceiveCount: int('maxReceiveCount', 1, 1000),
    converterBatchSize: int('converterBatchSize', 1, 10),
    converterMaxConcurrency: int('converterMaxConcurrency', 2, 1000),
    splitAboveMb: int('splitAboveMb', 0, 1_000_000),
    // The engine's own bound (eqdv::convert::MAX_RANGES).
    maxRanges: int('maxRanges', 2, 1024),
    plannerTimeout: int('plannerTimeout', 10, 900),
    plannerMemorySize: int('plannerMemorySize', 128, 10240),
    convertInPlannerMaxMb: int('convertInPlannerMaxMb', 0, 1_000_000),
    converterTimeout,
    converterMemorySize: int('converterMemorySize', 128, 10240),
    keyMemoryMb: int('keyMemoryMb', 1, 1_000_000),
    keyIndex: keyIndexMode('keyIndex'),
    parallelism: int('parallelism', 0, 1024),
    readMemoryMb: int('readMemoryMb', 1, 1_000_000),
    commitRetries,
    deadlineMarginSeconds,
    logRetentionDays,
    alarmTopicArn: raw('alarmTopicArn'),
    plannerAsset: nonEmpty('plannerAsset'),
    converterAsset: nonEmpty('converterAsset'),
  };
}

/** The shard queue's visibility timeout: 6x the converter's timeout, at most 12 hours. */
export function shardVisibilitySeconds(config: EqdvConfig): number {
  return Math.min(6 * config.converterTimeout, 43200);
}
